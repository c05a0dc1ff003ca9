// The page's entry point (the web build, viewer/web/CMakeLists.txt): plab-viewer's own
// main (viewer/window/main.cpp, compiled here as plab_viewer_main), then its exit code
// handed to the page.
//
// Why a wrapper: the viewer's frame loop returns to the browser every frame (Asyncify),
// so main's first return to emscripten is an unwind, and its real return value, frames
// later, reaches nobody. plab_web_exit (plab_web.js) gives it to the page
// (window.plab.exit), which is how a test learns that a --frames or --screenshot run
// passed its self-checks. (exit() would throw emscripten's ExitStatus out of the
// browser's animation-frame callback: a JavaScript error on every clean exit.)
extern "C" void plab_web_exit(int code);

int plab_viewer_main(int argc, char** argv);

int main(int argc, char** argv) {
    const int code = plab_viewer_main(argc, argv);
    plab_web_exit(code);
    return code;
}
