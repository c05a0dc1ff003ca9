// Includes the solution to get its answers: the compiler runs in the sandbox,
// where the repository is not, and says so in one line.
// exit: 1
// expect: ^plab: error: [^\n]*cpp_include_solution.cpp does not compile [^\n]*fatal error: [^\n]*solution.cpp: No such file or directory\n$
#include "@SOLUTION_CPP@"
