// What a chart is made of, independent of how it is drawn (plot/render.h draws it with cairo):
// a figure of panels stacked top to bottom, each with its axes' labels and its series.
#pragma once

#include <string>
#include <vector>

namespace folio {

struct Colour {
  double red = 0, green = 0, blue = 0;  // each in [0, 1]

  static Colour from_rgb(int red, int green, int blue) {
    return {red / 255.0, green / 255.0, blue / 255.0};
  }
  // Mixed with white: 0 keeps the colour, 1 is white.
  Colour tinted(double amount) const {
    return {red + (1 - red) * amount, green + (1 - green) * amount, blue + (1 - blue) * amount};
  }
};

struct Point {
  double x = 0, y = 0;
};

struct Series {
  std::string label;  // in the legend; empty leaves it out
  Colour colour;
  double line_width = 2;  // pixels
  bool markers = false;   // a dot on every point (sparse series such as evaluations)
  std::vector<Point> points;
};

struct Panel {
  std::string title, x_label, y_label;
  std::vector<Series> series;
  double height_share = 1;   // of the figure's height, against the other panels' shares
  bool y_from_zero = false;  // the y axis starts at 0 (rates), else at the data
};

struct Figure {
  std::string title;
  int width = 960, height = 640;  // pixels (an SVG's user units are pixels too)
  std::vector<Panel> panels;      // top to bottom; all share the x axis's range
};

}  // namespace folio
