/* Transformer Anatomy's lecture deck, offline: the player inside deck_<date>.html (ui/deck.py
   writes this file into it, with Plotly). Each slide's figure comes laid out as a 16:9 slide by
   the server (viz/present.py); it is drawn at that size when shown and scaled to the window as
   a whole (Plotly places its hover labels under a CSS transform). PageDown/PageUp, the arrow
   keys, space, Home/End and the buttons step; the slide's number is kept in the address's
   #fragment, so a reload stays on it. */
(() => {
  const figures = JSON.parse(document.getElementById('figures').textContent);
  const n = figures.length;
  let at = Math.min(Math.max((parseInt(location.hash.slice(1), 10) || 1) - 1, 0), n - 1);
  const fit = (el, layout) => {
    /* a slide with text under its figure (a layer's step and its card) leaves room for it */
    const below = el.parentElement?.querySelector('.html')?.offsetHeight || 0;
    const height = window.innerHeight - 48 - 40 - (below ? below + 8 : 0);
    const width = window.innerWidth - 32;
    const w = layout.width || 1600, h = layout.height || 900;
    const scale = Math.min(width / w, height / h);
    el.style.width = w + 'px';
    el.style.height = h + 'px';
    el.style.transformOrigin = '0 0';
    el.style.transform = `scale(${scale})`;
    el.style.marginBottom = `${(scale - 1) * h}px`;
  };
  const draw = (i) => {
    const fig = figures[i], el = document.getElementById('f' + i);
    if (!fig || !el) return;
    fit(el, fig.layout);
    if (!el.data) Plotly.newPlot(el, fig.data, fig.layout, {displaylogo: false, responsive: false});
  };
  const show = (i) => {
    at = Math.min(Math.max(i, 0), n - 1);
    document.querySelectorAll('.slide').forEach((s, j) => s.classList.toggle('on', j === at));
    document.getElementById('count').textContent = (at + 1) + ' / ' + n;
    history.replaceState(null, '', '#' + (at + 1));
    draw(at);
  };
  document.addEventListener('keydown', (e) => {
    const next = ['PageDown', 'ArrowRight', 'ArrowDown', ' '].includes(e.key);
    const prev = ['PageUp', 'ArrowLeft', 'ArrowUp'].includes(e.key);
    if (next || prev) { e.preventDefault(); show(at + (next ? 1 : -1)); }
    if (e.key === 'Home') show(0);
    if (e.key === 'End') show(n - 1);
  });
  document.getElementById('next').onclick = () => show(at + 1);
  document.getElementById('prev').onclick = () => show(at - 1);
  window.addEventListener('resize', () => draw(at));
  show(at);
})();
