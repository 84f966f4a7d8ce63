/* Which heads matter (ui/tabs/patching.py): a click on a head of its grids selects that head
   (the hidden #patch-pick box; its change selects it on the server and draws it on both texts
   of the pair) and the chosen shipped pair patches at once (a link's pair is patched with its
   view, on the server: ui/handlers.py Views.deeplink). */
(() => {
  const ta = window.ta;
  const GRIDS = '#patch-heads-plot, #patch-shift-plot, #patch-dla-plot';
  ta.drawHooks.push((gd) => {
    if (gd.taPick || !gd.on || !gd.closest(GRIDS)) return;
    gd.taPick = true;
    gd.on('plotly_click', (ev) => {
      const p = ev && ev.points && ev.points[0], props = ta._pickers?.['patch'];
      const cell = p && p.customdata;
      if (!props || !cell || cell.length < 2) return;
      if (+cell[1] < 0) return;  /* the attribution's MLP column (head -1) is no head */
      props.value = `${+cell[0]},${+cell[1]},${Date.now()}`;
      document.querySelector('#patch-pair-plot')?.scrollIntoView({behavior: 'smooth', block: 'start'});
    });
  });
  /* Another tab, as a click on its button would (the tab's own select event draws it). */
  ta.openTab = (id) => {
    document.querySelector(`#tabs [role=tab][id$="-${id}-button"]`)?.click();
    window.scrollTo({top: document.querySelector('#tabs')?.offsetTop || 0, behavior: 'smooth'});
  };
  ta.clickPatch = () => { document.querySelector('#patch-run')?.click(); };
})();
