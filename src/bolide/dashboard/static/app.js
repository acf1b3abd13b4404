// Live figures: the cluster TPS chart and a group's lag refresh on their own (no CDN, no build).
"use strict";
(function () {
  const refreshMs = Number(document.body.dataset.refreshMs || 5000);
  const maxPoints = Number(document.body.dataset.chartPoints || 60);

  function drawChart(svg, series) {
    const width = 600, height = 160, pad = 6;
    const all = series.flatMap((s) => s.points);
    const top = Math.max(1, ...all);
    const ns = "http://www.w3.org/2000/svg";
    svg.replaceChildren();
    series.forEach((s) => {
      if (s.points.length < 2) return;
      const step = (width - 2 * pad) / (maxPoints - 1);
      const start = maxPoints - s.points.length;
      const d = s.points.map((v, i) => {
        const x = pad + (start + i) * step;
        const y = height - pad - (v / top) * (height - 2 * pad);
        return (i ? "L" : "M") + x.toFixed(1) + " " + y.toFixed(1);
      }).join(" ");
      const path = document.createElementNS(ns, "path");
      path.setAttribute("d", d);
      path.setAttribute("fill", "none");
      path.setAttribute("stroke", s.color);
      path.setAttribute("stroke-width", "2");
      svg.appendChild(path);
    });
    axes(svg, top, width, height, pad);
    svg.dataset.points = String(series[0].points.length);
  }

  // The axes' words: the scale's top and 0 in messages per second, and the time window.
  function axes(svg, top, width, height, pad) {
    const ns = "http://www.w3.org/2000/svg";
    const label = (x, y, anchor, text, cls) => {
      const t = document.createElementNS(ns, "text");
      t.setAttribute("x", String(x)); t.setAttribute("y", String(y));
      t.setAttribute("text-anchor", anchor); t.setAttribute("font-size", "10");
      t.setAttribute("fill", "#616161"); t.setAttribute("class", cls);
      t.textContent = text;
      svg.appendChild(t);
    };
    const line = document.createElementNS(ns, "path");
    line.setAttribute("d", `M${pad} ${pad} L${pad} ${height - pad} L${width - pad} ${height - pad}`);
    line.setAttribute("fill", "none"); line.setAttribute("stroke", "#9e9e9e");
    svg.appendChild(line);
    label(pad + 4, pad + 10, "start", `${top.toFixed(top < 10 ? 1 : 0)} msg/s`, "axis-top");
    label(pad + 4, height - pad - 4, "start", "0", "axis-zero");
    const windowS = Math.round((maxPoints - 1) * refreshMs / 1000);
    label(width - pad, height - pad - 4, "end", `last ${windowS} s, now at right`, "axis-time");
  }

  function liveCluster() {
    const svg = document.getElementById("tps-chart");
    if (!svg) return;
    const put = [], get = [];
    async function tick() {
      try {
        const response = await fetch(svg.dataset.source, { headers: { Accept: "application/json" } });
        if (!response.ok) return;
        const brokers = await response.json();
        let putNow = 0, getNow = 0;
        for (const b of brokers) {
          putNow += b.put_tps; getNow += b.get_tps;
          const row = document.querySelector(`tr[data-broker="${CSS.escape(b.name)}"]`);
          if (row && !b.error) {
            row.querySelector(".put-tps").textContent = b.put_tps.toFixed(1);
            row.querySelector(".get-tps").textContent = b.get_tps.toFixed(1);
          }
        }
        put.push(putNow); get.push(getNow);
        if (put.length > maxPoints) { put.shift(); get.shift(); }
        drawChart(svg, [{ points: put, color: "#1f6feb" }, { points: get, color: "#e8710a" }]);
        document.getElementById("tps-now").textContent = `now: ${putNow.toFixed(1)} put/s, ${getNow.toFixed(1)} get/s`;
      } catch (error) { /* the next tick tries again */ }
    }
    tick();
    setInterval(tick, refreshMs);
  }

  function liveGroup() {
    const box = document.querySelector("[data-live]");
    if (!box) return;
    async function tick() {
      try {
        const response = await fetch(box.dataset.live, { headers: { Accept: "application/json" } });
        if (!response.ok) return;
        const group = await response.json();
        document.getElementById("group-lag").textContent = group.lag.toLocaleString("en");
        document.getElementById("group-tps").textContent = group.consume_tps.toFixed(1);
        for (const q of group.queues) {
          const row = document.querySelector(`tr[data-queue="${CSS.escape(q.topic + "/" + q.broker + "/" + q.queue_id)}"]`);
          if (row) row.querySelector(".lag").textContent = String(q.lag);
        }
        box.dataset.refreshed = String(Number(box.dataset.refreshed || 0) + 1);
      } catch (error) { /* the next tick tries again */ }
    }
    setInterval(tick, refreshMs);
  }

  liveCluster();
  liveGroup();
})();
