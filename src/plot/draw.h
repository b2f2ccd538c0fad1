// Draws a Figure onto any cairo surface (the image surface for PNG, the SVG surface for SVG):
// a white page, the title, then each panel with grid, frame, tick labels, axis labels, its
// series (lines first, marked series above them) and a legend in the emptiest corner.
#pragma once

#include <cairo.h>

#include "plot/figure.h"

namespace folio {

void draw_figure(cairo_t* context, const Figure& figure);

}  // namespace folio
