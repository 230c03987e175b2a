// kcoord's web console: reads /v1/groups and /v1/groups/{group} and draws them; no framework.
"use strict";

const REFRESH_MS = 2000;
const SVG = "http://www.w3.org/2000/svg";
const PHASES = [["join", "join_ms"], ["sync", "sync_ms"], ["reconcile", "reconcile_ms"]];
const TRIGGER_COLORS = ["#4f7cff", "#1fb58f", "#9b6bff", "#f0a83a", "#e5484d", "#14a3c7", "#c2569b"];

let selected = decodeURIComponent((location.hash.match(/group=([^&]*)/) || [])[1] || "");
let timer = null;

function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(attrs || {})) {
    if (name === "class") node.className = value;
    else if (name.startsWith("data-")) node.setAttribute(name, value);
    else node[name] = value;
  }
  for (const child of children) node.append(child instanceof Node ? child : String(child));
  return node;
}

function svg(tag, attrs, text) {
  const node = document.createElementNS(SVG, tag);
  for (const [name, value] of Object.entries(attrs || {})) node.setAttribute(name, value);
  if (text !== undefined) node.textContent = text;
  return node;
}

function clock(ms) {
  return new Date(ms).toLocaleTimeString([], { hour12: false });
}

function duration(ms) {
  if (ms === null || ms === undefined) return "–";
  if (ms < 1000) return `${ms} ms`;
  return ms % 1000 === 0 ? `${ms / 1000} s` : `${(ms / 1000).toFixed(ms < 10000 ? 2 : 1)} s`;
}

function clip(text, length) {
  return text.length > length ? text.slice(0, length - 1) + "…" : text;
}

function shortId(memberId) {
  return memberId.length > 28 ? memberId.slice(0, 16) + "…" + memberId.slice(-8) : memberId;
}

async function getJson(path) {
  const response = await fetch(path, { cache: "no-store" });
  if (!response.ok) throw new Error(`${path}: HTTP ${response.status}`);
  return response.json();
}

function renderGroups(groups) {
  const body = document.querySelector("#groups-table tbody");
  body.replaceChildren();
  for (const group of groups) {
    const row = el("tr", { "data-group": group.group },
      el("td", { class: "group-name", title: group.group }, group.group),
      el("td", {}, el("span", { class: `badge ${group.state}` }, group.state)),
      el("td", {}, group.protocol_type || "–"),
      el("td", { class: "num" }, group.members),
      el("td", { class: "num" }, group.generation ?? group.group_epoch ?? "–"),
      el("td", { class: "num" }, group.rebalances ?? "–"));
    if (group.group === selected) row.classList.add("selected");
    row.addEventListener("click", () => select(group.group));
    body.append(row);
  }
  document.getElementById("no-groups").hidden = groups.length > 0;
  document.getElementById("group-count").textContent =
    `${groups.length} group${groups.length === 1 ? "" : "s"}`;
}

function renderMembers(group) {
  const body = document.querySelector("#members-table tbody");
  body.replaceChildren();
  for (const member of group.members) {
    const assignment = member.assignment
      ? Object.entries(member.assignment).map(([topic, parts]) => `${topic}: ${parts.join(", ")}`)
      : [];
    const cell = el("td", { class: "assign" });
    if (assignment.length === 0) cell.append("–");
    assignment.forEach((line, i) => { if (i) cell.append(el("br")); cell.append(line); });
    body.append(el("tr", { "data-member": member.member_id },
      el("td", { class: "mono", title: member.member_id }, shortId(member.member_id)),
      el("td", {}, member.client_id),
      el("td", {}, member.client_host),
      cell));
  }
  if (group.members.length === 0) {
    body.append(el("tr", {}, el("td", { colSpan: 4, class: "empty" }, "no members")));
  }
}

function renderOffsets(group) {
  const body = document.querySelector("#offsets-table tbody");
  body.replaceChildren();
  for (const offset of group.offsets) {
    const lag = offset.lag === null ? "–" : offset.lag;
    body.append(el("tr", { "data-topic": offset.topic, "data-partition": offset.partition },
      el("td", {}, offset.topic),
      el("td", { class: "num" }, offset.partition),
      el("td", { class: "num" }, offset.committed),
      el("td", { class: "num" }, offset.log_end_offset ?? "–"),
      el("td", { class: `num${offset.lag > 1000 ? " lag-high" : ""}` }, lag)));
  }
  if (group.offsets.length === 0) {
    body.append(el("tr", {}, el("td", { colSpan: 5, class: "empty" }, "no committed offsets")));
  }
}

function renderSharePartitions(group) {
  const partitions = group.share_partitions || [];
  document.getElementById("share-partitions").hidden = group.type !== "share";
  const body = document.querySelector("#share-table tbody");
  body.replaceChildren();
  for (const p of partitions) {
    body.append(el("tr", { "data-topic": p.topic, "data-partition": p.partition },
      el("td", {}, p.topic),
      el("td", { class: "num" }, p.partition),
      el("td", { class: "num" }, p.start_offset),
      el("td", { class: "num" }, p.in_flight),
      el("td", { class: "num" }, p.acquired),
      el("td", { class: "num" }, p.archived),
      el("td", { class: "num" }, p.lag)));
  }
  if (partitions.length === 0) {
    body.append(el("tr", {}, el("td", { colSpan: 7, class: "empty" }, "no share partition read yet")));
  }
}

function renderTransactions(group) {
  const body = document.querySelector("#transactions-table tbody");
  body.replaceChildren();
  for (const txn of group.open_transactions || []) {
    const pending = txn.offsets.map((o) => `${o.topic}-${o.partition} @ ${o.offset}`).join(", ");
    body.append(el("tr", { "data-producer": txn.producer_id },
      el("td", { class: "num" }, txn.producer_id),
      el("td", { class: "num" }, txn.producer_epoch),
      el("td", {}, pending)));
  }
  if (!(group.open_transactions || []).length) {
    const settled = group.transactions || [];
    const last = settled[settled.length - 1];
    const text = last ? `none open; last: producer ${last.producer_id} ${last.result}` : "none";
    body.append(el("tr", {}, el("td", { colSpan: 3, class: "empty" }, text)));
  }
}

function niceStep(max) {
  const raw = max / 5;
  const power = Math.pow(10, Math.floor(Math.log10(raw)));
  for (const factor of [1, 2, 5, 10]) if (raw <= factor * power) return factor * power;
  return 10 * power;
}

function renderTimeline(history, nowMs) {
  const chart = document.getElementById("timeline");
  chart.replaceChildren();
  document.getElementById("no-rebalances").hidden = history.length > 0;
  chart.parentElement.hidden = history.length === 0;
  if (history.length === 0) return;

  const rows = history.slice().reverse();
  const width = 960, labelWidth = 250, rightWidth = 210, rowHeight = 36, stripHeight = 54, top = 26;
  const barLeft = labelWidth, barWidth = width - labelWidth - rightWidth;
  const height = stripHeight + top + rows.length * rowHeight + 8;
  chart.setAttribute("viewBox", `0 0 ${width} ${height}`);

  const triggers = [...new Set(history.map((r) => r.trigger))];
  const colorOf = (trigger) => TRIGGER_COLORS[triggers.indexOf(trigger) % TRIGGER_COLORS.length];
  const elapsed = (r) => (r.total_ms !== null ? r.total_ms : Math.max(nowMs - r.started_ms, 0));

  // 1. When the rebalances happened: a wall-clock strip, one dot per rebalance.
  const first = Math.min(...history.map((r) => r.started_ms));
  const last = Math.max(...history.map((r) => r.started_ms + elapsed(r)), first + 1000);
  const stripX = (ms) => barLeft + ((ms - first) / (last - first)) * barWidth;
  chart.append(svg("text", { x: 0, y: 22, class: "row-title" }, "When"));
  chart.append(svg("line", { x1: barLeft, x2: barLeft + barWidth, y1: 26, y2: 26, class: "axis" }));
  chart.append(svg("text", { x: barLeft, y: 44 }, clock(first)));
  chart.append(svg("text", { x: barLeft + barWidth, y: 44, "text-anchor": "end" }, clock(last)));
  for (const r of history) {
    const dot = svg("circle", { cx: stripX(r.started_ms), cy: 26, r: 6, class: "event",
      fill: colorOf(r.trigger) });
    dot.append(svg("title", {}, `${clock(r.started_ms)} ${r.trigger}: ${r.reason}`));
    chart.append(dot);
  }

  // 2. How long each phase took: one row per rebalance on a shared duration axis.
  const maxMs = Math.max(...rows.map(elapsed), 1);
  const step = niceStep(maxMs);
  const axisMax = Math.ceil(maxMs / step) * step;
  const x = (ms) => barLeft + (ms / axisMax) * barWidth;
  const y0 = stripHeight + top;
  for (let tick = 0; tick <= axisMax + step / 2; tick += step) {
    chart.append(svg("line", { x1: x(tick), x2: x(tick), y1: y0 - 6, y2: height - 4, class: "grid" }));
    chart.append(svg("text", { x: x(tick), y: y0 - 10, "text-anchor": "middle" }, duration(tick)));
  }
  rows.forEach((r, i) => {
    const y = y0 + i * rowHeight;
    const row = svg("g", { class: `rebalance outcome-${r.outcome}`, "data-trigger": r.trigger,
      "data-outcome": r.outcome, "data-generation-after": r.generation_after ?? "" });
    const after = r.generation_after ?? "…";
    row.append(svg("circle", { cx: 6, cy: y + 8, r: 4, fill: colorOf(r.trigger) }));
    row.append(svg("text", { x: 16, y: y + 12, class: "row-title" },
      clip(`gen ${r.generation_before} → ${after} · ${r.trigger}`, 34)));
    const subtitle = svg("text", { x: 16, y: y + 26 }, clip(`${clock(r.started_ms)} · ${r.reason}`, 37));
    subtitle.append(svg("title", {}, [r.reason, ...r.client_reasons].join("\n")));
    row.append(subtitle);
    let at = 0;
    for (const [phase, key] of PHASES) {
      const ms = r[key];
      if (ms === null || ms === undefined) continue;
      const rect = svg("rect", { x: x(at), y: y + 6, width: Math.max(x(at + ms) - x(at), 2), height: 18,
        rx: 3, class: `phase-${phase}` });
      rect.append(svg("title", {}, `${phase}: ${duration(ms)}`));
      row.append(rect);
      at += ms;
    }
    if (r.outcome === "in_progress") {
      const rect = svg("rect", { x: x(at), y: y + 6, width: Math.max(x(elapsed(r)) - x(at), 2), height: 18,
        rx: 3, class: "phase-progress" });
      rect.append(svg("title", {}, `in progress for ${duration(elapsed(r) - at)}`));
      row.append(rect);
    }
    const removed = r.removed_not_rejoined.length + r.removed_not_synced.length;
    const right = barLeft + barWidth + 10;
    row.append(svg("text", { x: right, y: y + 12, class: "row-title" },
      `${duration(r.total_ms)}${r.outcome === "in_progress" ? " so far" : ""}`));
    row.append(svg("text", { x: right, y: y + 26 },
      `${r.members_before.length} → ${r.members_after.length} members`));
    if (removed) {
      const mark = svg("text", { x: right + 110, y: y + 26, class: "removed" },
        `✕ ${removed} removed`);
      const who = [
        ...r.removed_not_rejoined.map((m) => `late, did not rejoin: ${m}`),
        ...r.removed_not_synced.map((m) => `did not sync: ${m}`),
      ];
      mark.append(svg("title", {}, who.join("\n")));
      row.append(mark);
    }
    chart.append(row);
  });
}

function renderDetail(group) {
  document.getElementById("detail").hidden = false;
  document.getElementById("group-title").textContent = group.group;
  const state = document.getElementById("group-state");
  state.textContent = group.state;
  state.className = `badge ${group.state}`;
  document.getElementById("card-protocol").textContent =
    `${group.protocol_type || "–"}${group.protocol ? " / " + group.protocol : ""}`;
  document.getElementById("card-generation").textContent = group.generation ?? group.group_epoch ?? "–";
  document.getElementById("card-members").textContent = group.members.length;
  const lags = [...group.offsets, ...(group.share_partitions || [])]
    .map((o) => o.lag).filter((lag) => lag !== null);
  document.getElementById("card-lag").textContent = lags.length ? lags.reduce((a, b) => a + b, 0) : "–";
  const latest = group.history[group.history.length - 1];
  document.getElementById("card-last").textContent = latest ? duration(latest.total_ms) : "–";
  renderTimeline(group.history, Date.now());
  renderMembers(group);
  renderOffsets(group);
  renderSharePartitions(group);
  renderTransactions(group);
}

async function refresh() {
  try {
    const groups = await getJson("/v1/groups");
    if (!groups.some((g) => g.group === selected)) selected = groups.length ? groups[0].group : "";
    renderGroups(groups);
    if (selected) {
      renderDetail(await getJson(`/v1/groups/${encodeURIComponent(selected)}`));
    } else {
      document.getElementById("detail").hidden = true;
    }
    document.getElementById("updated").textContent = `updated ${clock(Date.now())}`;
    document.body.dataset.loaded = "true";
  } catch (error) {
    document.getElementById("updated").textContent = `error: ${error.message}`;
  }
}

function select(group) {
  selected = group;
  history.replaceState(null, "", `#group=${encodeURIComponent(group)}`);
  refresh();
}

function schedule() {
  clearInterval(timer);
  if (document.getElementById("live").checked) timer = setInterval(refresh, REFRESH_MS);
}

document.getElementById("live").addEventListener("change", schedule);
refresh();
schedule();
