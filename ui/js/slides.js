/* Transformer Anatomy's page code: a figure drawn in a room, with the layout the server made
   for it (viz/present.py, viz/screen.py): presented on this window (layout.meta.present:
   present.js), or as a 16:9 slide (layout.meta.slide: the PNG and SVG buttons, exports.js, and
   the lecture deck's offline file, which embeds this file). Nothing here lays a figure out. */
(() => {
  const ta = (window.ta = window.ta || {});
  /* The traces with the room's colour bars (``bars``: one per trace, null where it has none),
     keeping the words drawn now: the head switch changes a bar's ticks and title in the
     browser. The traces are new objects; their arrays are shared. */
  ta.withBars = (data, bars) => data.map((trace, i) => {
    const bar = bars && bars[i];
    if (!trace || !bar) return trace;
    const now = trace.colorbar || {};
    return {...trace, colorbar: {...bar, tickvals: now.tickvals ?? bar.tickvals,
      ticktext: now.ticktext ?? bar.ticktext,
      title: {...(bar.title || {}), text: now.title?.text ?? bar.title?.text}}};
  });
  /* A room's own trace properties over the page's traces (viz.present: a circuit graph's nodes
     and their names grown with the room's text), {trace index: properties}. */
  ta.restyled = (data, traces) => (!traces ? data
    : data.map((trace, i) => (trace && traces[i] ? {...trace, ...traces[i]} : trace)));
  /* [data, layout] of a figure as the slide the server laid out (layout.meta.slide), its title
     the one drawn now; null for a figure without one. */
  ta.asSlide = (data, layout) => {
    const slide = layout && layout.meta && layout.meta.slide;
    if (!slide) return null;
    const big = JSON.parse(JSON.stringify(slide.layout));
    big.title = {...big.title, text: layout.title?.text ?? big.title?.text};
    big.template = layout.template;  /* the page's: the server sends it once */
    return [ta.restyled(ta.withBars(data, slide.colorbars), slide.traces), big];
  };
})();
