// cairo's objects owned by unique_ptr, released by cairo's own destroy functions.
#pragma once

#include <cairo.h>

#include <memory>

namespace folio {

struct CairoRelease {
  void operator()(cairo_t* context) const { cairo_destroy(context); }
  void operator()(cairo_surface_t* surface) const { cairo_surface_destroy(surface); }
};

using CairoContext = std::unique_ptr<cairo_t, CairoRelease>;
using CairoSurface = std::unique_ptr<cairo_surface_t, CairoRelease>;

}  // namespace folio
