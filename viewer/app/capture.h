// Headless capture: render into an offscreen framebuffer and save it as a PNG.
//
// What it teaches: nothing about prefill; it is how tests and the README get
// pictures of each panel without anyone at the screen (run under Xvfb).
#pragma once

#include <string>

namespace plab::viewer {

// An offscreen RGBA8 framebuffer of a fixed size. Needs a current GL 3.3 context.
class OffscreenTarget {
public:
    OffscreenTarget(int width, int height);
    ~OffscreenTarget();
    OffscreenTarget(const OffscreenTarget&) = delete;
    OffscreenTarget& operator=(const OffscreenTarget&) = delete;

    void bind();    // draw into it
    void unbind();  // back to the window
    // Reads the pixels back and writes a PNG; throws plab::Error when it cannot.
    void save_png(const std::string& path) const;

    int width() const { return width_; }
    int height() const { return height_; }

private:
    int width_, height_;
    unsigned int fbo_ = 0, texture_ = 0;
};

}  // namespace plab::viewer
