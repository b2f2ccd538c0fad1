// Writes a Figure as a PNG or an SVG file (by the path's extension), drawn by cairo.
//
// cairo writes an SVG's text as glyph outlines, which neither search nor screen readers can read;
// the SVG therefore also carries the figure's title as <title> and, as <desc>, each panel's title
// and the labels of its legend.
#pragma once

#include <string>

#include "plot/figure.h"

namespace folio {

enum class ImageFormat { kPng, kSvg };

// From the extension (.png or .svg, any case); anything else is a UsageError saying so.
ImageFormat image_format_of(const std::string& path);

// Throws folio::Error naming the file when it cannot be written.
void write_figure(const Figure& figure, const std::string& path);

// The SVG document as text.
std::string figure_svg(const Figure& figure);

}  // namespace folio
