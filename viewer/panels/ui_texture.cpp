// Heatmap textures (see ui_texture.h).
#include "panels/ui_texture.h"

#include <GL/gl.h>

#ifndef GL_CLAMP_TO_EDGE
#define GL_CLAMP_TO_EDGE 0x812F
#endif

namespace plab::viewer {

void upload_texture(HeatmapTexture& tex, const std::vector<unsigned char>& rgba, int width,
                    int height) {
    if (tex.id == 0) {
        GLuint id = 0;
        glGenTextures(1, &id);
        tex.id = id;
    }
    glBindTexture(GL_TEXTURE_2D, tex.id);
    glTexParameteri(GL_TEXTURE_2D, GL_TEXTURE_MIN_FILTER, GL_NEAREST);
    glTexParameteri(GL_TEXTURE_2D, GL_TEXTURE_MAG_FILTER, GL_NEAREST);
    glTexParameteri(GL_TEXTURE_2D, GL_TEXTURE_WRAP_S, GL_CLAMP_TO_EDGE);
    glTexParameteri(GL_TEXTURE_2D, GL_TEXTURE_WRAP_T, GL_CLAMP_TO_EDGE);
    glPixelStorei(GL_UNPACK_ALIGNMENT, 4);
    glTexImage2D(GL_TEXTURE_2D, 0, GL_RGBA, width, height, 0, GL_RGBA, GL_UNSIGNED_BYTE,
                 rgba.data());
    tex.width = width;
    tex.height = height;
}

void release_texture(HeatmapTexture& tex) {
    if (tex.id != 0) {
        GLuint id = tex.id;
        glDeleteTextures(1, &id);
    }
    tex = HeatmapTexture{};
}

}  // namespace plab::viewer
