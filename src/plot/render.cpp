#include "plot/render.h"

#include <cairo-svg.h>

#include <algorithm>
#include <cctype>
#include <fstream>

#include "core/error.h"
#include "plot/cairo_handles.h"
#include "plot/draw.h"

namespace folio {

namespace {

void check(cairo_status_t status, const std::string& what) {
  if (status != CAIRO_STATUS_SUCCESS)
    throw Error(what + ": " + cairo_status_to_string(status));
}

std::string xml_escaped(const std::string& text) {
  std::string escaped;
  for (char c : text) {
    switch (c) {
      case '&': escaped += "&amp;"; break;
      case '<': escaped += "&lt;"; break;
      case '>': escaped += "&gt;"; break;
      case '"': escaped += "&quot;"; break;
      default: escaped += c;
    }
  }
  return escaped;
}

// "loss: train; val. training speed: baby; other."
std::string legend_description(const Figure& figure) {
  std::string description;
  for (const Panel& panel : figure.panels) {
    std::string labels;
    for (const Series& series : panel.series)
      if (!series.label.empty()) labels += (labels.empty() ? "" : "; ") + series.label;
    description += (description.empty() ? "" : " ") + panel.title +
                   (labels.empty() ? "" : ": " + labels) + ".";
  }
  return description;
}

cairo_status_t append_to_string(void* closure, const unsigned char* data, unsigned int length) {
  static_cast<std::string*>(closure)->append(reinterpret_cast<const char*>(data), length);
  return CAIRO_STATUS_SUCCESS;
}

void draw_on(cairo_surface_t* surface, const Figure& figure, const std::string& what) {
  check(cairo_surface_status(surface), what);
  CairoContext context(cairo_create(surface));
  draw_figure(context.get(), figure);
  check(cairo_status(context.get()), what);
}

}  // namespace

ImageFormat image_format_of(const std::string& path) {
  std::string lower = path;
  std::transform(lower.begin(), lower.end(), lower.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  if (lower.ends_with(".png")) return ImageFormat::kPng;
  if (lower.ends_with(".svg")) return ImageFormat::kSvg;
  throw UsageError("cannot tell the image format of '" + path +
                   "': name the file FILE.png or FILE.svg");
}

std::string figure_svg(const Figure& figure) {
  std::string svg;
  {
    CairoSurface surface(
        cairo_svg_surface_create_for_stream(append_to_string, &svg, figure.width, figure.height));
    cairo_svg_surface_set_document_unit(surface.get(), CAIRO_SVG_UNIT_PX);
    draw_on(surface.get(), figure, "cannot draw the SVG");
    cairo_surface_finish(surface.get());
    check(cairo_surface_status(surface.get()), "cannot draw the SVG");
  }
  const size_t svg_start = svg.find("<svg");
  const size_t after_open_tag = svg.find('>', svg_start);
  if (svg_start == std::string::npos || after_open_tag == std::string::npos)
    throw Error("cairo wrote no <svg> element");
  svg.insert(after_open_tag + 1, "\n<title>" + xml_escaped(figure.title) + "</title>\n<desc>" +
                                     xml_escaped(legend_description(figure)) + "</desc>");
  return svg;
}

void write_figure(const Figure& figure, const std::string& path) {
  const std::string cannot_write = "cannot write " + path;
  if (image_format_of(path) == ImageFormat::kSvg) {
    const std::string svg = figure_svg(figure);
    std::ofstream file(path, std::ios::binary | std::ios::trunc);
    file << svg;
    file.close();
    if (!file) throw Error(cannot_write + ": is the folder there and writable?");
    return;
  }
  CairoSurface surface(
      cairo_image_surface_create(CAIRO_FORMAT_RGB24, figure.width, figure.height));
  draw_on(surface.get(), figure, "cannot draw the PNG");
  const cairo_status_t status = cairo_surface_write_to_png(surface.get(), path.c_str());
  if (status != CAIRO_STATUS_SUCCESS)
    throw Error(cannot_write + ": is the folder there and writable? (" +
                cairo_status_to_string(status) + ")");
}

}  // namespace folio
