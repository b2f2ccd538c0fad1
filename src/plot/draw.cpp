#include "plot/draw.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>

#include "plot/ticks.h"

namespace folio {

namespace {

constexpr const char* kFontFamily = "DejaVu Sans";  // Debian's fontconfig default sans
constexpr double kTitleBand = 44;    // the figure's title above the panels
constexpr double kLeftMargin = 84;   // y tick labels and the y axis label
constexpr double kRightMargin = 28;
constexpr double kTopMargin = 34;     // the panel's title
constexpr double kBottomMargin = 54;  // x tick labels and the x axis label
constexpr double kMarkerRadius = 3.5;
constexpr int kTargetTicks = 7;  // on the y axis; the wider x axis gets two more

const Colour kInk{0.13, 0.13, 0.13};
const Colour kFrame{0.45, 0.45, 0.45};
const Colour kGrid{0.9, 0.9, 0.9};

struct Box {
  double left, top, right, bottom;
  double width() const { return right - left; }
  double height() const { return bottom - top; }
  bool contains(double x, double y) const {
    return x >= left && x <= right && y >= top && y <= bottom;
  }
};

// Data coordinates to page coordinates inside a panel's plot area.
struct Mapping {
  AxisScale x, y;
  Box area;
  double page_x(double value) const {
    return area.left + (value - x.low) / (x.high - x.low) * area.width();
  }
  double page_y(double value) const {
    return area.bottom - (value - y.low) / (y.high - y.low) * area.height();
  }
};

enum class Align { kLeft, kCentre, kRight };

void set_colour(cairo_t* context, const Colour& colour) {
  cairo_set_source_rgb(context, colour.red, colour.green, colour.blue);
}

// Text with its baseline at y, aligned on x.
void draw_text(cairo_t* context, const std::string& text, double x, double y, double size,
               Align align, bool bold = false) {
  cairo_select_font_face(context, kFontFamily, CAIRO_FONT_SLANT_NORMAL,
                         bold ? CAIRO_FONT_WEIGHT_BOLD : CAIRO_FONT_WEIGHT_NORMAL);
  cairo_set_font_size(context, size);
  cairo_text_extents_t extents;
  cairo_text_extents(context, text.c_str(), &extents);
  const double shift = align == Align::kLeft     ? 0
                       : align == Align::kCentre ? extents.x_advance / 2
                                                 : extents.x_advance;
  cairo_move_to(context, x - shift, y);
  cairo_show_text(context, text.c_str());
}

double text_width(cairo_t* context, const std::string& text, double size) {
  cairo_select_font_face(context, kFontFamily, CAIRO_FONT_SLANT_NORMAL, CAIRO_FONT_WEIGHT_NORMAL);
  cairo_set_font_size(context, size);
  cairo_text_extents_t extents;
  cairo_text_extents(context, text.c_str(), &extents);
  return extents.x_advance;
}

// A point drawn: finite and within ±kLargestPlotted (ticks.h); any other is a gap in its line.
bool usable(const Point& point) {
  return std::fabs(point.x) <= kLargestPlotted && std::fabs(point.y) <= kLargestPlotted;
}

// The x range of every panel together, so that stacked panels line up step for step.
AxisScale shared_x_scale(const Figure& figure) {
  double low = std::numeric_limits<double>::infinity(), high = -low;
  for (const Panel& panel : figure.panels)
    for (const Series& series : panel.series)
      for (const Point& point : series.points)
        if (usable(point)) low = std::min(low, point.x), high = std::max(high, point.x);
  return nice_scale(std::min(low, 0.0), high, kTargetTicks + 2);
}

AxisScale y_scale(const Panel& panel) {
  double low = std::numeric_limits<double>::infinity(), high = -low;
  for (const Series& series : panel.series)
    for (const Point& point : series.points)
      if (usable(point)) low = std::min(low, point.y), high = std::max(high, point.y);
  if (panel.y_from_zero) low = std::min(low, 0.0);
  return nice_scale(low, high, kTargetTicks);
}

void draw_axes(cairo_t* context, const Panel& panel, const Mapping& map) {
  cairo_set_line_width(context, 1);
  set_colour(context, kGrid);
  for (double tick : map.x.ticks) {
    cairo_move_to(context, std::round(map.page_x(tick)) + 0.5, map.area.top);
    cairo_line_to(context, std::round(map.page_x(tick)) + 0.5, map.area.bottom);
  }
  for (double tick : map.y.ticks) {
    cairo_move_to(context, map.area.left, std::round(map.page_y(tick)) + 0.5);
    cairo_line_to(context, map.area.right, std::round(map.page_y(tick)) + 0.5);
  }
  cairo_stroke(context);

  set_colour(context, kFrame);
  cairo_rectangle(context, map.area.left + 0.5, map.area.top + 0.5, map.area.width() - 1,
                  map.area.height() - 1);
  cairo_stroke(context);

  set_colour(context, kInk);
  for (double tick : map.x.ticks)
    draw_text(context, tick_label(tick, map.x), map.page_x(tick), map.area.bottom + 18, 11,
              Align::kCentre);
  for (double tick : map.y.ticks)
    draw_text(context, tick_label(tick, map.y), map.area.left - 8, map.page_y(tick) + 4, 11,
              Align::kRight);
  draw_text(context, panel.x_label, (map.area.left + map.area.right) / 2, map.area.bottom + 40,
            12, Align::kCentre);
  draw_text(context, panel.title, map.area.left, map.area.top - 12, 13, Align::kLeft, true);
  cairo_save(context);
  cairo_translate(context, 20, (map.area.top + map.area.bottom) / 2);
  cairo_rotate(context, -M_PI / 2);
  draw_text(context, panel.y_label, 0, 0, 12, Align::kCentre);
  cairo_restore(context);
}

// One path per series (a gap where a value is not finite), so an SVG holds one <path> for it.
void draw_series(cairo_t* context, const Series& series, const Mapping& map) {
  cairo_save(context);
  cairo_rectangle(context, map.area.left, map.area.top, map.area.width(), map.area.height());
  cairo_clip(context);
  set_colour(context, series.colour);
  cairo_set_line_width(context, series.line_width);
  cairo_set_line_join(context, CAIRO_LINE_JOIN_ROUND);
  cairo_set_line_cap(context, CAIRO_LINE_CAP_ROUND);
  bool drawing = false;
  for (const Point& point : series.points) {
    if (!usable(point)) {
      drawing = false;
      continue;
    }
    if (drawing) cairo_line_to(context, map.page_x(point.x), map.page_y(point.y));
    else cairo_move_to(context, map.page_x(point.x), map.page_y(point.y));
    drawing = true;
  }
  cairo_stroke(context);
  if (series.markers) {
    for (const Point& point : series.points) {
      if (!usable(point)) continue;
      cairo_new_sub_path(context);
      cairo_arc(context, map.page_x(point.x), map.page_y(point.y), kMarkerRadius, 0, 2 * M_PI);
    }
    cairo_fill(context);
  }
  cairo_restore(context);
}

// How much of the data a legend box at `box` would hide: points along every series, sampled
// every few pixels.
int data_under(const Box& box, const Panel& panel, const Mapping& map) {
  int hidden = 0;
  for (const Series& series : panel.series) {
    for (size_t i = 0; i < series.points.size(); ++i) {
      const Point& to = series.points[i];
      if (!usable(to)) continue;
      const Point& from = i > 0 && usable(series.points[i - 1]) ? series.points[i - 1] : to;
      const double x0 = map.page_x(from.x), y0 = map.page_y(from.y);
      const double x1 = map.page_x(to.x), y1 = map.page_y(to.y);
      const int samples = 1 + static_cast<int>(std::hypot(x1 - x0, y1 - y0) / 4);
      for (int s = 1; s <= samples; ++s) {
        const double t = static_cast<double>(s) / samples;
        hidden += box.contains(x0 + t * (x1 - x0), y0 + t * (y1 - y0));
      }
    }
  }
  return hidden;
}

void draw_legend(cairo_t* context, const Panel& panel, const Mapping& map) {
  constexpr double kSize = 12, kRow = 19, kPad = 9, kSwatch = 22, kInset = 10;
  std::vector<const Series*> entries;
  double widest = 0;
  for (const Series& series : panel.series) {
    if (series.label.empty()) continue;
    entries.push_back(&series);
    widest = std::max(widest, text_width(context, series.label, kSize));
  }
  if (entries.empty()) return;
  const double width = 2 * kPad + kSwatch + 8 + widest;
  const double height = 2 * kPad + kRow * static_cast<double>(entries.size()) - 5;
  const Box& area = map.area;
  const std::array<Box, 4> corners = {
      Box{area.right - kInset - width, area.top + kInset, area.right - kInset,
          area.top + kInset + height},
      Box{area.left + kInset, area.top + kInset, area.left + kInset + width,
          area.top + kInset + height},
      Box{area.right - kInset - width, area.bottom - kInset - height, area.right - kInset,
          area.bottom - kInset},
      Box{area.left + kInset, area.bottom - kInset - height, area.left + kInset + width,
          area.bottom - kInset}};
  const Box* best = &corners[0];
  int least_hidden = data_under(*best, panel, map);
  for (const Box& corner : corners) {
    const int hidden = data_under(corner, panel, map);
    if (hidden < least_hidden) best = &corner, least_hidden = hidden;
  }

  cairo_rectangle(context, best->left + 0.5, best->top + 0.5, width, height);
  cairo_set_source_rgba(context, 1, 1, 1, 0.92);
  cairo_fill_preserve(context);
  set_colour(context, kFrame);
  cairo_set_line_width(context, 1);
  cairo_stroke(context);
  double y = best->top + kPad + 12;
  for (const Series* series : entries) {
    // Swatches are filled shapes, not strokes: an SVG's stroked paths are then the series alone.
    set_colour(context, series->colour);
    const double swatch_height = std::max(series->line_width, 2.0);
    cairo_rectangle(context, best->left + kPad, y - 4 - swatch_height / 2, kSwatch,
                    swatch_height);
    if (series->markers) {
      cairo_new_sub_path(context);
      cairo_arc(context, best->left + kPad + kSwatch / 2, y - 4, kMarkerRadius, 0, 2 * M_PI);
    }
    cairo_fill(context);
    set_colour(context, kInk);
    draw_text(context, series->label, best->left + kPad + kSwatch + 8, y, kSize, Align::kLeft);
    y += kRow;
  }
}

}  // namespace

void draw_figure(cairo_t* context, const Figure& figure) {
  cairo_set_source_rgb(context, 1, 1, 1);
  cairo_paint(context);
  set_colour(context, kInk);
  draw_text(context, figure.title, figure.width / 2.0, 28, 17, Align::kCentre, true);

  double total_share = 0;
  for (const Panel& panel : figure.panels) total_share += panel.height_share;
  const AxisScale x = shared_x_scale(figure);
  double top = kTitleBand;
  for (const Panel& panel : figure.panels) {
    const double height = (figure.height - kTitleBand) * panel.height_share / total_share;
    const Mapping map{x, y_scale(panel),
                      Box{kLeftMargin, top + kTopMargin, figure.width - kRightMargin,
                          top + height - kBottomMargin}};
    draw_axes(context, panel, map);
    for (bool marked : {false, true})  // sparse marked series (evaluations) above the lines
      for (const Series& series : panel.series)
        if (series.markers == marked) draw_series(context, series, map);
    draw_legend(context, panel, map);
    top += height;
  }
}

}  // namespace folio
