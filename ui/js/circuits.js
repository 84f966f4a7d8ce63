/* How the heads connect (ui/tabs/circuits.py): a click on a head of the circuit graph opens that
   head on the Attention tab. The graph's nodes carry their names ("L1H0", "L0MLP", "embed",
   "logits"; an encoder-decoder's under "encoder.", "decoder." and "cross.", whose stack the
   pick names, "layer,head,stack,time"); only a head's opens, and a click that Plotly gives to an edge starting at the
   node (its first point stands on it) opens that node too. The tab is shown first (its own
   select event draws it), then the head goes into the hidden #circuit-pick box, whose change
   selects it on the server for the tab now visible: the head view is drawn on that head and
   the sliders follow, as after a click on an overview tile there. */
(() => {
  const ta = window.ta;
  /* a head's node: "L1H0", or an encoder-decoder's "encoder.L1H0", "decoder.L1H0", "cross.L1H0" */
  const HEAD = /^(?:(encoder|decoder|cross)\.)?L(\d+)H(\d+)$/;
  /* The node a clicked point stands on: the nodes are the figure's last trace
     (viz.circuits.circuit_figure), each edge a line from its source node's place. */
  const nodeAt = (gd, p) => {
    if (p.customdata !== undefined) return String(p.customdata);
    const nodes = gd.data[gd.data.length - 1] || {};
    const i = (nodes.x || []).findIndex((x, k) => x === p.x && nodes.y[k] === p.y);
    return i < 0 ? '' : String(nodes.customdata[i]);
  };
  ta.drawHooks.push((gd) => {
    if (gd.taPick || !gd.on || !gd.closest('#circuit-graph-plot')) return;
    gd.taPick = true;
    gd.on('plotly_click', (ev) => {
      const p = ev && ev.points && ev.points[0], props = ta._pickers?.circuit;
      const head = p && HEAD.exec(nodeAt(gd, p));
      if (!props || !head) return;
      ta.openTab('attention');
      /* the pick carries the visible tab (ta.stamp): written once the tab click has made it
         the Attention tab, a frame later */
      const stack = head[1] ? `${head[1]},` : '';
      requestAnimationFrame(() => { props.value = `${head[2]},${head[3]},${stack}${Date.now()}`; });
    });
  });
})();
