// Heatmap pictures as OpenGL textures: uploaded when what they show changes, drawn as
// one quad.
//
// What it teaches: nothing about prefill; a prompt of 512 tokens has 262144 attention
// cells, and one textured quad costs a frame far less than that many rectangles (the
// Mask panel, panel_mask_heatmap.cpp, bakes its cells into such a texture).
#pragma once

#include <vector>

#include "app/viewer_state.h"

namespace plab::viewer {

// Uploads an RGBA8 image (width × height, rows top-down) into `tex`.
void upload_texture(HeatmapTexture& tex, const std::vector<unsigned char>& rgba, int width,
                    int height);
// Deletes the GL texture (if any) and empties `tex`.
void release_texture(HeatmapTexture& tex);

}  // namespace plab::viewer
