// The one Catch2 main of every test binary.
//
// ctest runs each case as `<binary> <case name> -w NoTests -w NoAssertions`
// (tests/CMakeLists.txt): a name that matches no case, or a case that asserts
// nothing, must fail instead of passing silently. Catch2 2.13 ORs warnings
// together, but its command-line parser accepts `-w` only once (a second one is
// "Unrecognised token: -w", exit 255). So this main takes every
// `-w NoTests` / `-w NoAssertions` pair itself, hands Catch2 the rest, and
// turns the warnings on after Catch2 has read its command line.
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>
#include <string>
#include <vector>

int main(int argc, char* argv[]) {
    std::vector<char*> rest;
    int warnings = Catch::WarnAbout::Nothing;
    for (int i = 0; i < argc; ++i) {
        const std::string arg = argv[i];
        if ((arg == "-w" || arg == "--warn") && i + 1 < argc) {
            const std::string name = argv[i + 1];
            if (name == "NoTests" || name == "NoAssertions") {
                warnings |=
                    name == "NoTests" ? Catch::WarnAbout::NoTests : Catch::WarnAbout::NoAssertions;
                ++i;
                continue;
            }
        }
        rest.push_back(argv[i]);  // anything else, unknown warnings included, is Catch2's
    }
    Catch::Session session;
    const int rc = session.applyCommandLine(int(rest.size()), rest.data());
    if (rc != 0) return rc;
    session.configData().warnings =
        static_cast<Catch::WarnAbout::What>(session.configData().warnings | warnings);
    return session.run();
}
