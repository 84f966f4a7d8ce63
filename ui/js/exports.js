/* Transformer Anatomy's page code: PNG and SVG downloads of a figure, as a slide.

   The figure is drawn again off screen with the slide layout the server made for it
   (layout.meta.slide, viz/present.py: 1600 × 900 px, 22 px text; a square map only as wide as
   its plot and colour bar, so the image is the map rather than a strip of a wide card). The
   file is named for what it holds (the server's name: head_bert_L4H3, compare_bert_L0H0-L0H1;
   the head switch keeps it current). Resolves {name, width, height, plot: [w, h]} (tests read
   it). */
(() => {
  const ta = (window.ta = window.ta || {});

  ta.saveImage = async (id, format = 'png', save = true) => {
    const gd = document.querySelector(`#${id} .js-plotly-plot`), P = window.Plotly;
    if (!gd || !P || !gd.data || !gd.layout) return null;
    const server = gd.taServer || {layout: gd.layout, colorbars: []};
    const data = gd.data.map((t, i) => ({...t, ...(server.styles?.[i] || {}),
      colorbar: server.colorbars?.[i] ?? t.colorbar}));  /* the page's (not a presented room's) */
    const title = gd.layout.title?.text ?? server.layout.title?.text;
    const layout = {...server.layout, title: {...(server.layout.title || {}), text: title}};
    const slide = ta.asSlide(data, layout);
    if (!slide) return null;  /* a figure the server laid out for no room (an API client's) */
    const [traces, big] = slide;
    const width = big.width, height = big.height;
    const div = document.createElement('div');
    div.style.cssText = `position:fixed;left:-${2 * width}px;top:0;width:${width}px;height:${height}px;`;
    document.body.appendChild(div);
    try {
      await P.newPlot(div, traces, big, {staticPlot: true});
      const plot = [div._fullLayout.xaxis._length, div._fullLayout.yaxis._length];
      const name = gd._context?.toImageButtonOptions?.filename || id;
      if (save) {
        await P.downloadImage(div, {format, width, height, filename: name,
          scale: format === 'png' ? 2 : 1});
      }
      return {name, width, height, plot};
    } finally {
      P.purge(div);
      div.remove();
    }
  };
})();
