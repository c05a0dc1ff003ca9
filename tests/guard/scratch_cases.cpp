// Scratch Catch2 cases for the test of the registration guard (issue 8).
//
// Built in three variants from this one file, never registered in the real
// suite (tests/guard/CMakeLists.txt registers each into a scratch ctest tree):
//   PLAB_SCRATCH_VARIANT 0 "clean":     names ctest can register one to one;
//   PLAB_SCRATCH_VARIANT 1 "semicolon": the mistake the guard exists for, a ';'
//                                       in a case name (catch_discover_tests
//                                       splits it into two entries that match
//                                       nothing);
//   PLAB_SCRATCH_VARIANT 2 "silent":    clean names plus a case that asserts
//                                       nothing (-w NoAssertions must fail it).
#include <catch2/catch.hpp>
#include <string>

#if PLAB_SCRATCH_VARIANT == 1
#define PLAB_SCRATCH_FIRST "scratch: one; two"
#else
#define PLAB_SCRATCH_FIRST "scratch: one and two"
#endif

// Each case checks that the case Catch2 is running is the one named here: a
// ctest entry whose spec selected some other case would fail it.
TEST_CASE(PLAB_SCRATCH_FIRST, "[scratch]") {
    REQUIRE(Catch::getResultCapture().getCurrentTestName() == PLAB_SCRATCH_FIRST);
}

// Commas and brackets are escaped by catch_discover_tests: the guard must
// accept them, or it would flag correct names.
TEST_CASE("scratch: a name with a comma, and [brackets]", "[scratch]") {
    REQUIRE(Catch::getResultCapture().getCurrentTestName() ==
            "scratch: a name with a comma, and [brackets]");
}

#if PLAB_SCRATCH_VARIANT == 2
TEST_CASE("scratch: asserts nothing", "[scratch]") {
    const std::string unchecked = "computed, never compared";
    (void)unchecked;
}
#endif
