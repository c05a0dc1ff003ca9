// Headless capture (see capture.h): glReadPixels -> stb_image_write PNG.
#include "app/capture.h"

#define GL_GLEXT_PROTOTYPES 1
#include <GL/gl.h>
#include <GL/glext.h>
#include <GLFW/glfw3.h>

#include <cstring>
#include <vector>

#include "core/error.h"

#define STB_IMAGE_WRITE_IMPLEMENTATION
#include <stb_image_write.h>

namespace plab::viewer {

namespace {

// Framebuffer objects are core in GL 3.0 but not exported by every libGL:
// fetch them through GLFW like the ImGui backend's loader does.
struct FboFunctions {
    PFNGLGENFRAMEBUFFERSPROC gen = nullptr;
    PFNGLDELETEFRAMEBUFFERSPROC del = nullptr;
    PFNGLBINDFRAMEBUFFERPROC bind = nullptr;
    PFNGLFRAMEBUFFERTEXTURE2DPROC texture2d = nullptr;
    PFNGLCHECKFRAMEBUFFERSTATUSPROC status = nullptr;
};

FboFunctions load_fbo_functions() {
    FboFunctions f;
    f.gen = reinterpret_cast<PFNGLGENFRAMEBUFFERSPROC>(glfwGetProcAddress("glGenFramebuffers"));
    f.del =
        reinterpret_cast<PFNGLDELETEFRAMEBUFFERSPROC>(glfwGetProcAddress("glDeleteFramebuffers"));
    f.bind = reinterpret_cast<PFNGLBINDFRAMEBUFFERPROC>(glfwGetProcAddress("glBindFramebuffer"));
    f.texture2d = reinterpret_cast<PFNGLFRAMEBUFFERTEXTURE2DPROC>(
        glfwGetProcAddress("glFramebufferTexture2D"));
    f.status = reinterpret_cast<PFNGLCHECKFRAMEBUFFERSTATUSPROC>(
        glfwGetProcAddress("glCheckFramebufferStatus"));
    PLAB_CHECK(f.gen && f.del && f.bind && f.texture2d && f.status,
               "this OpenGL driver has no framebuffer objects (OpenGL 3.0+ is needed)");
    return f;
}

}  // namespace

OffscreenTarget::OffscreenTarget(int width, int height) : width_(width), height_(height) {
    const FboFunctions f = load_fbo_functions();
    glGenTextures(1, &texture_);
    glBindTexture(GL_TEXTURE_2D, texture_);
    glTexImage2D(GL_TEXTURE_2D, 0, GL_RGBA8, width, height, 0, GL_RGBA, GL_UNSIGNED_BYTE, nullptr);
    glTexParameteri(GL_TEXTURE_2D, GL_TEXTURE_MIN_FILTER, GL_NEAREST);
    glTexParameteri(GL_TEXTURE_2D, GL_TEXTURE_MAG_FILTER, GL_NEAREST);
    f.gen(1, &fbo_);
    f.bind(GL_FRAMEBUFFER, fbo_);
    f.texture2d(GL_FRAMEBUFFER, GL_COLOR_ATTACHMENT0, GL_TEXTURE_2D, texture_, 0);
    const GLenum status = f.status(GL_FRAMEBUFFER);
    f.bind(GL_FRAMEBUFFER, 0);
    PLAB_CHECK(status == GL_FRAMEBUFFER_COMPLETE,
               "cannot create a " << width << "x" << height << " offscreen framebuffer (status 0x"
                                  << std::hex << status << ")");
}

OffscreenTarget::~OffscreenTarget() {
    const FboFunctions f = load_fbo_functions();
    f.del(1, &fbo_);
    glDeleteTextures(1, &texture_);
}

void OffscreenTarget::bind() {
    load_fbo_functions().bind(GL_FRAMEBUFFER, fbo_);
    glViewport(0, 0, width_, height_);
}

void OffscreenTarget::unbind() {
    load_fbo_functions().bind(GL_FRAMEBUFFER, 0);
}

void OffscreenTarget::save_png(const std::string& path) const {
    const FboFunctions f = load_fbo_functions();
    std::vector<unsigned char> pixels(static_cast<size_t>(width_) * height_ * 4);
    f.bind(GL_FRAMEBUFFER, fbo_);
    glFinish();
    glPixelStorei(GL_PACK_ALIGNMENT, 1);
    glReadPixels(0, 0, width_, height_, GL_RGBA, GL_UNSIGNED_BYTE, pixels.data());
    // OpenGL's first row is the bottom one; a PNG's is the top one.
    const size_t row = static_cast<size_t>(width_) * 4;
    std::vector<unsigned char> flipped(pixels.size());
    for (int y = 0; y < height_; ++y)
        std::memcpy(&flipped[static_cast<size_t>(y) * row],
                    &pixels[static_cast<size_t>(height_ - 1 - y) * row], row);
    for (size_t i = 3; i < flipped.size(); i += 4) flipped[i] = 255;  // opaque
    const int ok =
        stbi_write_png(path.c_str(), width_, height_, 4, flipped.data(), static_cast<int>(row));
    PLAB_CHECK(ok != 0, "cannot write screenshot '" << path << "' (is the folder writable?)");
}

}  // namespace plab::viewer
