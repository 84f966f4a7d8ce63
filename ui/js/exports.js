/* Transformer Anatomy's page code: PNG and SVG downloads of a figure, cropped for a slide.

   The figure is drawn again off screen as a slide (ta.bigLayout, slides.js: 22 px text), 16:9
   (1600 × 900); a square heatmap is then narrowed to its plot with the colour bar beside it, so
   the plot takes most of the image rather than a strip of a wide card. The file is named for
   what it holds (the server's name: head_bert_L4H3, compare_bert_L0H0-L0H1; the head switch
   keeps it current). Resolves {name, width, height, plot: [w, h]} (tests read it). */
(() => {
  const ta = (window.ta = window.ta || {});
  const W = 1600, H = 900, FONT = 22;

  ta.saveImage = async (id, format = 'png', save = true) => {
    const gd = document.querySelector(`#${id} .js-plotly-plot`), P = window.Plotly;
    if (!gd || !P || !gd.data || !gd.layout) return null;
    const server = gd.taServer || {layout: gd.layout, colorbars: []};
    const data = gd.data.map((t, i) => ({...t, colorbar: server.colorbars?.[i] ?? t.colorbar}));
    const title = gd.layout.title?.text ?? server.layout.title?.text;
    const layout = {...server.layout, title: {...(server.layout.title || {}), text: title},
      meta: undefined};
    const [traces, big] = ta.bigLayout(data, layout, W, H, FONT);
    const div = document.createElement('div');
    div.style.cssText = `position:fixed;left:-${2 * W}px;top:0;width:${W}px;height:${H}px;`;
    document.body.appendChild(div);
    try {
      await P.newPlot(div, traces, big, {staticPlot: true});
      let width = W;
      const full = div._fullLayout, xa = full.xaxis;
      if (full.yaxis && full.yaxis.scaleanchor === 'x' && xa) {
        const spare = full._size.w - xa._length;  /* the room the square left on its sides */
        if (spare > 40) {
          width = Math.round(W - spare + 24);
          await P.relayout(div, {width});
          ta.colorbarBeside(div);
        }
      }
      const plot = [div._fullLayout.xaxis._length, div._fullLayout.yaxis._length];
      const name = gd._context?.toImageButtonOptions?.filename || id;
      if (save) {
        await P.downloadImage(div, {format, width, height: H, filename: name,
          scale: format === 'png' ? 2 : 1});
      }
      return {name, width, height: H, plot};
    } finally {
      P.purge(div);
      div.remove();
    }
  };
})();
