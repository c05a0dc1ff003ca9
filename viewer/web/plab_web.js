// plab_web.js: the page's side of plab-viewer (an emscripten JS library, linked with
// --js-library; viewer/web/CMakeLists.txt).
//
// main.cpp's frame loop is the native one; at the end of each frame it calls
// plab_web_next_frame(), which hands control back to the browser (Asyncify unwinds
// main and run, keeping their locals) and resumes the loop at the next animation
// frame: the browser shows the canvas and delivers mouse and keys in between.
// window.plab (shell.html) counts the frames, so a test knows the page is drawing.
mergeInto(LibraryManager.library, {
  plab_web_next_frame: function() {
    return Asyncify.handleSleep(function(wakeUp) {
      if (typeof window !== 'undefined' && window.plab) window.plab.frames++;
      requestAnimationFrame(function() { wakeUp(); });
    });
  },

  // The viewer's exit code (web_main.cpp), for the page: Module.plabExit (shell.html).
  plab_web_exit: function(code) {
    if (Module['plabExit']) Module['plabExit'](code);
  },
});
