// seqd monitor: polls one page of GET /v1/sequences (100 or 1,000 sequences by name)
// and GET /v1/info (the instance's facts and totals) every 2 s, and draws one
// row per sequence and the instance's rate; next/previous move between pages
// by the API's `next` cursor, and the search box narrows the list to the
// names starting with what is typed (the API's `prefix`, debounced; a new
// prefix starts again at its first page). Only the page shown is ever
// requested, never the whole list: the page stays as fast with a million
// sequences as with ten. <body> carries data-page (1-based), data-prefix (of
// the page shown), data-refreshes and data-started (the instance's started_at). Every number cell carries data-k (what
// it is) and data-v (the raw value from the API), which the browser test
// reads back. Paths are relative, so the page also works behind a reverse
// proxy's path prefix; the prefix is kept in the page's own query string
// (`?prefix=`), so a filtered view can be linked and survives a reload.
'use strict';

(() => {
  const REFRESH_MS = 2000;
  // Sequences per page: 100, or 1,000 (the API's most) as chosen in the
  // toolbar and kept in the page's query string (`?limit=1000`).
  const SIZES = [100, 1000];
  const asked = Number(new URLSearchParams(window.location.search).get('limit'));
  let pageSize = SIZES.includes(asked) ? asked : SIZES[0];
  const SEARCH_DEBOUNCE_MS = 300;
  // The start of a sequence name: what the API accepts as `prefix`.
  const PREFIX = /^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$/;
  const $ = (id) => document.getElementById(id);
  const nf = new Intl.NumberFormat(undefined, { maximumFractionDigits: 0 });
  const nf1 = new Intl.NumberFormat(undefined, { maximumFractionDigits: 1 });

  // IDs are 64-bit: integers beyond 2^53 are kept exact as BigInt, using the
  // source text JSON.parse hands to revivers.
  function parseJson(text) {
    return JSON.parse(text, (key, value, ctx) => {
      if (typeof value === 'number' && !Number.isSafeInteger(value) && ctx &&
          typeof ctx.source === 'string' && /^-?\d+$/.test(ctx.source)) {
        return BigInt(ctx.source);
      }
      return value;
    });
  }

  // Under --client-auth on, listing needs a token with `read`: opened as
  // /#token=seqd_..., the page keeps it for this tab (the fragment never
  // reaches the server or its logs) and sends it as a Bearer token.
  const token = (() => {
    const m = /(?:^#|&)token=([^&]+)/.exec(location.hash);
    if (m) {
      sessionStorage.setItem('seqd-token', decodeURIComponent(m[1]));
      history.replaceState(null, '', location.pathname + location.search);
    }
    return sessionStorage.getItem('seqd-token');
  })();

  async function getJson(path, signal) {
    const headers = { accept: 'application/json' };
    if (token) headers.authorization = 'Bearer ' + token;
    const resp = await fetch(path, { cache: 'no-store', headers, signal });
    const body = await resp.text();
    if (!resp.ok) {
      let detail = 'HTTP ' + resp.status;
      try { detail += ' ' + JSON.parse(body).error.code; } catch (_) { /* not our error body */ }
      if (resp.status === 401 || resp.status === 403) {
        detail += ': client tokens are on; open this page as /#token=<a token with read>';
      }
      throw new Error(path + ': ' + detail);
    }
    return parseJson(body);
  }

  const big = (v) => BigInt(v);
  const int = (v) => (v === null || v === undefined) ? '—' : nf.format(v);
  const rate = (v) => (v === null || v === undefined) ? '—' : (v >= 100 ? nf : nf1).format(v);

  function ago(ms) {
    if (ms === null || ms === undefined) return '—';
    if (ms < 1000) return nf.format(ms) + ' ms ago';
    const s = ms / 1000;
    if (s < 90) return nf.format(s) + ' s ago';
    if (s < 5400) return nf.format(s / 60) + ' min ago';
    return nf1.format(s / 3600) + ' h ago';
  }

  function latency(ms) {
    if (ms === null || ms === undefined) return '—';
    return (ms < 10 ? nf1 : nf).format(ms) + ' ms';
  }

  function seconds(s) {
    if (s % 3600 === 0) return s / 3600 + ' h';
    if (s % 60 === 0) return s / 60 + ' min';
    return s + ' s';
  }

  const plural = (n, one, many) => (String(n) === '1' ? one : many);

  function el(tag, attrs, ...children) {
    return fill(document.createElement(tag), attrs, children);
  }

  // Sets the attributes (of an HTML element, `class` and `title` as
  // properties; null and undefined skipped) and appends the children (nested lists flattened,
  // null, undefined and false skipped) of a new element `e`.
  function fill(e, attrs, children) {
    for (const [k, v] of Object.entries(attrs || {})) {
      if (v === undefined || v === null) continue;
      if (e instanceof SVGElement) e.setAttribute(k, String(v));
      else if (k === 'class') e.className = v;
      else if (k === 'title') e.title = v;
      else e.setAttribute(k, v);
    }
    for (const c of children.flat(Infinity)) {
      if (c === null || c === undefined || c === false) continue;
      e.append(c instanceof Node ? c : String(c));
    }
    return e;
  }

  // A number the test can read: data-k names it, data-v is the raw value.
  function num(key, value, text, cls) {
    const raw = (value === null || value === undefined) ? '' : String(value);
    return el('span', { class: cls ? 'n ' + cls : 'n', 'data-k': key, 'data-v': raw },
      text === undefined ? int(value) : text);
  }

  function status(buf, seq) {
    if (!buf) return ['idle', 'not served'];
    if (buf.last_error) return ['error', 'error'];
    if (buf.loading) return ['loading', 'loading'];
    // Global order keeps no segment: each request is reserved when it comes.
    if (seq.ordering === 'global') return ['ok', 'ok'];
    const cur = buf.current;
    if ((!cur || cur.remaining === 0) && !buf.next) return ['low', 'low'];
    return ['ok', 'ok'];
  }

  // Over stripes: the stripe (numbered from 1) whose blocks a segment came from.
  function stripeOf(index) {
    return index === null || index === undefined ? null
      : [' · ', el('span', { 'data-k': 'stripe', 'data-v': String(index) }, 'stripe ' + (index + 1))];
  }

  function segmentCell(cur, stripe) {
    if (!cur) return el('td', { class: 'c-seg' }, el('span', { class: 'dim' }, 'none loaded'));
    const len = big(cur.last) - big(cur.first) + 1n;
    const used = cur.cursor === null ? len : big(cur.cursor) - big(cur.first);
    const pct = Number((used * 10000n) / len) / 100;
    const bar = el('div', { class: pct >= 100 ? 'bar full' : 'bar' }, el('span'));
    bar.firstChild.style.width = Math.min(100, pct) + '%';
    return el('td', { class: 'c-seg' },
      el('div', { class: 'range' }, num('cur_first', cur.first), el('span', { class: 'to' }, '–'), num('cur_last', cur.last)),
      bar,
      el('span', { class: 'sub' },
        cur.cursor === null ? 'used up' : ['next ', num('cursor', cur.cursor)],
        ' · ', num('used_pct', pct, nf1.format(pct) + '%'), ' used', stripeOf(stripe)));
  }

  function nextCell(buf, stripe) {
    if (buf.next) {
      return el('td', { class: 'c-next' },
        el('span', { class: 'next-ready', 'data-k': 'next', 'data-v': 'ready' }, 'ready'),
        el('span', { class: 'sub range' }, num('next_first', buf.next.first), el('span', { class: 'to' }, '–'), num('next_last', buf.next.last),
          stripeOf(stripe)));
    }
    if (buf.loading) {
      return el('td', { class: 'c-next' }, el('span', { class: 'next-loading', 'data-k': 'next', 'data-v': 'loading' }, 'loading…'));
    }
    return el('td', { class: 'c-next' },
      el('span', { class: 'next-none', 'data-k': 'next', 'data-v': 'none', title: 'fetched once 10% of the current segment is used' }, 'not yet'));
  }

  // Global order in the segment and next columns: what it does instead of
  // keeping segments (every request reserved from the database, requests
  // that arrive together merged into one reservation), and how many IDs a
  // reservation served on average since this instance started.
  function globalCells(buf) {
    const reservations = Number(buf.fetches);
    const mean = reservations > 0 ? Number(big(buf.issued)) / reservations : null;
    return [
      el('td', { class: 'c-seg' },
        el('span', { 'data-k': 'ordering', 'data-v': 'global' }, 'global order'),
        el('span', { class: 'sub' }, 'no segment: each request reserved from the database')),
      el('td', { class: 'c-next', title: 'IDs issued / reservations made, since this instance started serving it' },
        mean === null ? el('span', { class: 'sub dim' }, 'no reservation yet')
          : el('span', { class: 'sub' }, num('ids_per_reservation', mean, nf1.format(mean)),
            mean === 1 ? ' ID' : ' IDs', ' per reservation')),
    ];
  }

  // Rates as pictures, drawn here from what the page polls (no library): each
  // live sequence's IDs/s over the last HISTORY refreshes (3 minutes) as a
  // sparkline (kept for the page shown only), and the whole instance's IDs/s
  // (GET /v1/info's totals: every sequence and every door) as a chart with
  // a y axis (a round scale with headroom above the peak), the time of day
  // on the x axis, the current rate labelled at the right, and the refreshes
  // in which segments were fetched (and their mean latency) and in which
  // requests waited marked on it. A global sequence's reservations fetch no
  // segment and are not marked.
  const HISTORY = 90;
  const WINDOW_MS = HISTORY * REFRESH_MS;
  const sparks = new Map(); // name -> IDs/s, oldest first
  // Per refresh, oldest first: { at (ms since 1970), secs (since the refresh
  // before), from and to (ids_drawn then and now), rate, fetches, latency, waits }.
  const series = [];
  const SVG = 'http://www.w3.org/2000/svg';
  const nf3 = new Intl.NumberFormat(undefined, { maximumFractionDigits: 3 });

  function svg(tag, attrs, ...children) {
    return fill(document.createElementNS(SVG, tag), attrs, children);
  }

  function remember(list, value) {
    list.push(value);
    if (list.length > HISTORY) list.shift();
  }

  // A round scale for values up to `max`: steps of 1, 2, 2.5 or 5 times a
  // power of ten, about four of them, the top at least 15% above `max` so a
  // steady rate is drawn below the top edge, not along it.
  function niceScale(max) {
    const want = max > 0 ? max * 1.15 : 1;
    const raw = want / 4;
    const mag = 10 ** Math.floor(Math.log10(raw));
    const step = [1, 2, 2.5, 5, 10].map((m) => m * mag).find((s) => s >= raw * (1 - 1e-9));
    const count = Math.ceil(want / step - 1e-9);
    const ticks = [];
    for (let i = 0; i <= count; i += 1) ticks.push(Number((i * step).toPrecision(12)));
    return { top: ticks[ticks.length - 1], ticks };
  }

  // An axis value, short enough for the axis: 1,500, 25k, 1.2M.
  function axisValue(v) {
    if (v >= 1e6) return nf3.format(v / 1e6) + 'M';
    if (v >= 1e4) return nf3.format(v / 1e3) + 'k';
    return nf3.format(v);
  }

  const pad2 = (n) => String(n).padStart(2, '0');

  // The local time of day, 24 h: 14:05:30.
  function clock(ms) {
    const d = new Date(ms);
    return pad2(d.getHours()) + ':' + pad2(d.getMinutes()) + ':' + pad2(d.getSeconds());
  }

  const points = (xs, ys) => xs.map((x, i) => x.toFixed(1) + ',' + ys[i].toFixed(1)).join(' ');

  // A sequence's sparkline: its points spread over the whole width, on a
  // round scale from 0.
  function sparkline(name, r) {
    const values = sparks.get(name) || [];
    if (r !== null) remember(values, r);
    sparks.set(name, values);
    const max = Math.max(0, ...values);
    const { top } = niceScale(max);
    const [w, h] = [120, 32];
    const n = values.length;
    const xs = values.map((_, i) => (n > 1 ? (i * w) / (n - 1) : w));
    const ys = values.map((v) => h - 1 - (v / top) * (h - 2));
    return svg('svg', {
      class: 'spark', viewBox: `0 0 ${w} ${h}`, width: w, height: h, role: 'img',
      'data-k': 'spark', 'data-points': n, 'data-max': max, 'data-top': top,
      'aria-label': 'IDs per second, last ' + n + ' refreshes',
    },
    svg('title', {}, 'IDs/s over the last ' + n + ' refreshes (2 s each); peak ' + rate(max) + ', scale 0 to ' + rate(top)),
    svg('line', { class: 'axis', x1: 0, y1: h - 0.5, x2: w, y2: h - 0.5 }),
    n > 1 ? svg('polyline', { points: points(xs, ys) }) : null);
  }

  // The instance's chart over the last WINDOW_MS, ending at the last refresh.
  function renderChart(point) {
    if (point) remember(series, point);
    const chart = $('chart');
    const w = Math.max(320, Math.round(chart.getBoundingClientRect().width) || 600);
    const h = 168;
    const [left, right, top, bottom] = [52, 96, 10, 22];
    const [x0, x1, y0, y1] = [left, w - right, top, h - bottom];
    const n = series.length;
    const end = n ? series[n - 1].at : Date.now();
    const start = end - WINDOW_MS;
    const rates = series.map((p) => p.rate);
    const max = Math.max(0, ...rates);
    const scale = niceScale(max);
    const xAt = (t) => x0 + ((t - start) / WINDOW_MS) * (x1 - x0);
    const yAt = (v) => y1 - (v / scale.top) * (y1 - y0);
    const yAxis = scale.ticks.map((v) => [
      svg('line', { class: v === 0 ? 'axis' : 'grid', x1: x0, y1: yAt(v).toFixed(1), x2: x1, y2: yAt(v).toFixed(1) }),
      svg('text', { class: 'y-label', x: x0 - 6, y: (yAt(v) + 4).toFixed(1), 'text-anchor': 'end', 'data-v': v }, axisValue(v)),
    ]);
    // Times of day on round half minutes (whole minutes when narrow).
    const every = x1 - x0 < 480 ? 60000 : 30000;
    const xAxis = [];
    for (let t = Math.ceil(start / every) * every; t <= end; t += every) {
      const x = xAt(t);
      xAxis.push(svg('line', { class: 'tick', x1: x.toFixed(1), y1: y1, x2: x.toFixed(1), y2: y1 + 4 }),
        svg('text', { class: 'x-label', x: x.toFixed(1), y: h - 5, 'text-anchor': 'middle', 'data-t': t }, clock(t)));
    }
    const marks = [];
    series.forEach((p) => {
      const x = xAt(p.at).toFixed(1);
      if (p.fetches > 0) {
        marks.push(svg('circle', { class: 'm-fetch', cx: x, cy: yAt(p.rate).toFixed(1), r: 3 },
          svg('title', {}, p.fetches + (p.fetches === 1 ? ' fetch' : ' fetches') + ', mean ' + latency(p.latency))));
      }
      if (p.waits > 0) {
        marks.push(svg('path', { class: 'm-wait', d: `M${x} ${y1 - 7} l4 7 h-8 z` },
          svg('title', {}, p.waits + (p.waits === 1 ? ' request waited' : ' requests waited') + ' for a fetch')));
      }
    });
    const last = n ? series[n - 1] : null;
    const now = last ? [
      svg('circle', { class: 'now-dot', cx: x1.toFixed(1), cy: yAt(last.rate).toFixed(1), r: 3 }),
      svg('text', {
        class: 'now-label', x: x1 + 8, y: (Math.min(y1, Math.max(y0 + 8, yAt(last.rate))) + 4).toFixed(1),
        'data-k': 'chart-now', 'data-v': last.rate,
      }, rate(last.rate) + ' IDs/s'),
    ] : null;
    chart.replaceChildren(svg('svg', {
      class: 'chart', viewBox: `0 0 ${w} ${h}`, width: w, height: h, role: 'img',
      'aria-label': 'IDs per second of this instance, last 3 minutes',
      'data-points': n, 'data-max': max, 'data-top': scale.top, 'data-from': start, 'data-to': end,
      'data-series': JSON.stringify(series.map((p) => [p.at, p.secs, p.from, p.to])),
      'data-fetch-marks': series.filter((p) => p.fetches > 0).length,
      'data-wait-marks': series.filter((p) => p.waits > 0).length,
    },
    yAxis,
    xAxis,
    n > 1 ? svg('polyline', { points: points(series.map((p) => xAt(p.at)), rates.map(yAt)) }) : null,
    marks,
    now));
    $('chart-peak').textContent = rate(max);
  }

  window.addEventListener('resize', () => renderChart(null));

  // The instance's totals (GET /v1/info): the tiles, and a point of the
  // chart per refresh from the change since the refresh before. Totals of
  // another process (restarted behind the page: a new started_at) start
  // again from zero, so no point is drawn across the restart.
  let lastTotals = null;

  function renderTotals(facts, now) {
    const t = facts.totals;
    const prev = lastTotals && lastTotals.started === facts.started_at ? lastTotals : null;
    lastTotals = { t, at: now, started: facts.started_at };
    const tile = (id, value, text) => {
      const e = $(id);
      e.dataset.v = String(value);
      e.textContent = text;
    };
    tile('t-issued', t.ids_drawn, nf.format(t.ids_drawn));
    tile('t-errors', t.fetch_errors, nf.format(t.fetch_errors));
    $('t-errors').classList.toggle('bad', t.fetch_errors > 0);
    tile('t-memory', t.live_names, nf.format(t.live_names));
    const secs = prev ? (now - prev.at) / 1000 : 0;
    if (secs < 0.5) {
      renderChart(null); // the axes, until there is a change to draw
      return;
    }
    const p = prev.t;
    const fetches = Math.max(0, Number(t.segment_fetches) - Number(p.segment_fetches));
    const [from, to] = [Number(p.ids_drawn), Number(t.ids_drawn)];
    const point = {
      at: Date.now(),
      secs,
      from,
      to,
      rate: Math.max(0, to - from) / secs,
      fetches,
      latency: fetches > 0 ? ((t.fetch_seconds - p.fetch_seconds) / fetches) * 1000 : null,
      waits: Math.max(0, Number(t.fetch_waits) - Number(p.fetch_waits)),
    };
    tile('t-rate', point.rate, rate(point.rate));
    renderChart(point);
  }

  // Live rate: IDs issued between two refreshes, per second.
  const previous = new Map();

  function liveRate(name, buf, now) {
    const prev = previous.get(name);
    previous.set(name, { issued: buf.issued, at: now });
    if (!prev || now - prev.at < 500) return null;
    return Math.max(0, Number(big(buf.issued) - big(prev.issued))) / ((now - prev.at) / 1000);
  }

  // A serial sequence: its format and reset, and the period this instance
  // is in: the serials it issued there, and the counters it reserved (the
  // top one, and the share of the {seq:0N} capacity they take). Reserved is
  // not issued: a fetch reserves a segment of counters ahead of use.
  function serialLine(seq) {
    if (!seq.serial) return null;
    const s = seq.serial;
    const p = seq.period;
    const buf = seq.buffer;
    const fill = p && p.fill !== null && p.fill !== undefined
      ? el('span', { 'data-k': 'fill', 'data-v': String(p.fill) },
        ' (' + (p.fill * 100).toFixed(p.fill < 0.1 ? 2 : 0) + '% of ' + nf.format(p.capacity) + ')')
      : null;
    return el('span', { class: 'serial', title: s.format + ' · reset ' + s.reset + ' · ' + s.time_zone },
      el('span', { 'data-k': 'format', 'data-v': s.format }, s.format),
      ' · ', s.reset,
      p ? [' · period ', el('span', { 'data-k': 'period', 'data-v': p.key }, p.key || 'all'),
        buf ? [' · ', num('period_issued', buf.issued), ' issued'] : null,
        p.reserved_up_to !== null ? [' · reserved to ', num('reserved', p.reserved_up_to), fill] : null] : null);
  }

  // The max ID column. A serial sequence's own row issues nothing (its
  // max_id never moves): shown is the top counter this instance reserved in
  // the current period, or a dash.
  function maxIdCell(seq) {
    if (!seq.serial) return el('td', { class: 'num' }, num('max_id', seq.max_id));
    const top = seq.period ? seq.period.reserved_up_to : null;
    if (top === null || top === undefined) {
      return el('td', { class: 'num dim', title: 'a serial sequence: no counter reserved here in this period' }, '—');
    }
    return el('td', { class: 'num', title: 'the highest counter this instance reserved in period ' + (seq.period.key || 'all') },
      num('counter_top', top), el('span', { class: 'sub' }, 'counter, reserved'));
  }

  function row(seq, now, totals) {
    const buf = seq.buffer;
    const [state, label] = status(buf, seq);
    const name = el('td', { class: 'c-name' },
      el('div', { class: 'name-line' },
        el('span', { class: 'name' }, seq.name),
        el('span', { class: 'pill s-' + state, 'data-k': 'status', 'data-v': state }, label)),
      serialLine(seq),
      seq.description ? el('span', { class: 'desc', title: seq.description }, seq.description) : null);
    const maxId = maxIdCell(seq);
    const rowStep = el('span', { class: 'sub' }, 'row ', num('row_step', seq.step));
    const attrs = { 'data-name': seq.name, 'data-live': buf ? '1' : '0', 'data-status': state, class: 's-' + state };
    const dash = (title) => el('span', { class: 'dim', title }, '—');
    if (!buf) {
      const none = () => el('td', { class: 'num dim' }, '—');
      return el('tr', attrs, name, maxId, el('td', { class: 'num' }, dash(), rowStep),
        el('td', { class: 'dim' }, '—'), el('td', { class: 'dim' }, '—'), none(), none(), none(), none());
    }
    const r = liveRate(seq.name, buf, now);
    totals.live += 1;
    // Global order fetches no segment: no adapted step, no estimate at a
    // fetch; its reservations are counted where a segment's fetches are.
    const global = seq.ordering === 'global';
    const noSegment = 'global order fetches no segment';
    return el('tr', attrs,
      name,
      maxId,
      el('td', { class: 'num' }, global ? dash(noSegment) : num('step', buf.current_step), rowStep),
      global ? globalCells(buf)
        : [segmentCell(buf.current, seq.stripes && seq.stripes.current), nextCell(buf, seq.stripes && seq.stripes.next)],
      el('td', { class: 'num c-rate' }, num('rate', r, rate(r)), sparkline(seq.name, r),
        global ? el('span', { class: 'sub' }, dash(noSegment))
          : el('span', { class: 'sub', title: 'estimate at the last segment fetch' }, 'est. ', num('rate_est', buf.rate_per_sec, rate(buf.rate_per_sec)))),
      el('td', { class: 'num' }, num('issued', buf.issued),
        global
          ? el('span', { class: 'sub' }, num('reservations', buf.fetches), plural(buf.fetches, ' reservation', ' reservations'))
          : el('span', { class: 'sub' }, num('fetches', buf.fetches), plural(buf.fetches, ' fetch', ' fetches'), ' · ',
            num('waits', buf.waits), plural(buf.waits, ' wait', ' waits'))),
      el('td', { class: 'num' }, num('fetch_ago', buf.last_fetch_ago_ms, ago(buf.last_fetch_ago_ms)),
        el('span', { class: 'sub' }, num('fetch_ms', buf.last_fetch_latency_ms, latency(buf.last_fetch_latency_ms)))),
      el('td', { class: 'num', title: buf.last_error ? buf.last_error.kind + ': ' + buf.last_error.message : '' },
        num('errors', buf.fetch_errors, undefined, buf.fetch_errors > 0 ? 'err' : 'dim'),
        buf.last_error
          ? el('span', { class: 'err-text', 'data-k': 'last_error', 'data-v': buf.last_error.kind }, buf.last_error.message)
          : null));
  }

  function render(sequences, shownPrefix) {
    const now = performance.now();
    const totals = { live: 0 };
    // Live sequences first, then the ones this instance has not served; by name within each.
    const sorted = [...sequences].sort((a, b) =>
      (a.buffer ? 0 : 1) - (b.buffer ? 0 : 1) || (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
    $('rows').replaceChildren(...sorted.map((s) => row(s, now, totals)));
    // Keep the live-rate memory to the page shown: paging through a million
    // sequences must not grow it.
    const shown = new Set(sequences.map((s) => s.name));
    for (const memory of [previous, sparks]) {
      for (const name of memory.keys()) {
        if (!shown.has(name)) memory.delete(name);
      }
    }
    $('empty').hidden = sequences.length > 0 || shownPrefix !== null;
    $('no-match').hidden = sequences.length > 0 || shownPrefix === null;
    $('no-match-prefix').textContent = shownPrefix || '';
    $('t-live').textContent = nf.format(totals.live);
    $('t-total').textContent = nf.format(sequences.length);
  }

  function renderInfo(info) {
    $('version').textContent = 'v' + info.version;
    $('backend').textContent = info.backend;
    const admin = $('admin');
    const modes = {
      token: ['bearer token', 'good'],
      open_loopback: ['open · loopback only', 'warn'],
      refused: ['disabled', 'off'],
    };
    const [text, cls] = modes[info.admin_auth] || [info.admin_auth, ''];
    admin.textContent = text;
    admin.className = 'fact-v ' + cls;
    admin.title = info.admin_auth_description;
    const resp = $('resp');
    resp.textContent = info.resp_listen || 'off';
    resp.className = 'fact-v ' + (info.resp_listen ? 'good' : 'off');
    resp.title = info.resp_listen
      ? 'Redis clients draw IDs at ' + info.resp_listen + ': INCR name, INCRBY name n'
      : 'no RESP listener (--resp-listen)';
    $('target').textContent = seconds(info.segment_target_secs);
    document.title = 'seqd monitor · ' + info.backend;
    document.body.dataset.started = info.started_at;
  }

  function setConnection(ok, message) {
    const conn = $('conn');
    conn.dataset.state = ok ? 'live' : 'down';
    $('conn-text').textContent = ok
      ? 'live · ' + clock(Date.now())
      : 'cannot refresh · retrying';
    $('sequences').classList.toggle('stale', !ok);
    const banner = $('banner');
    banner.hidden = ok;
    if (!ok) {
      banner.textContent = 'Cannot refresh: ' + message +
        (message.includes('503') ? ' (the database is unreachable or too slow; /metrics still shows the buffers)' : '') +
        '. Showing the last data received.';
    }
  }

  let refreshes = 0; // successful refreshes, in data-refreshes on <body>
  // What is shown: the names starting with `prefix` (null: all), the page
  // after `after` (null: the first), the cursors of the pages before it, and
  // the API's `next` for the page after it. `view` counts the moves to
  // another page or prefix: a load started for an older view is dropped.
  let prefix = null;
  let after = null;
  let before = [];
  let next = null;
  let view = 0;
  let timer = null;
  let loading = null; // the AbortController of the load in flight

  function pagePath(pfx, cursor) {
    return 'v1/sequences?limit=' + pageSize +
      (pfx === null ? '' : '&prefix=' + encodeURIComponent(pfx)) +
      (cursor === null ? '' : '&after=' + encodeURIComponent(cursor));
  }

  function renderPager(sequences, shownPrefix) {
    $('prev').disabled = before.length === 0;
    $('next').disabled = next === null;
    const page = before.length + 1;
    const names = sequences.map((s) => s.name).sort();
    const text = 'page ' + page +
      (shownPrefix === null ? '' : ' of names starting with “' + shownPrefix + '”') +
      (names.length ? ' · ' + names[0] + ' – ' + names[names.length - 1] : '');
    $('page-info').textContent = text;
    $('view-info').textContent = text;
    document.body.dataset.page = String(page);
    document.body.dataset.prefix = shownPrefix === null ? '' : shownPrefix;
  }

  async function tick() {
    const mine = view;
    const [pfx, cursor] = [prefix, after];
    clearTimeout(timer);
    const controller = new AbortController();
    loading = controller;
    try {
      const [facts, data] = await Promise.all([
        getJson('v1/info', controller.signal),
        getJson(pagePath(pfx, cursor), controller.signal),
      ]);
      renderInfo(facts);
      renderTotals(facts, performance.now());
      if (mine !== view) return; // moved meanwhile; the move loads its own view
      next = data.next;
      render(data.sequences, pfx);
      renderPager(data.sequences, pfx);
      setConnection(true);
      refreshes += 1;
      document.body.dataset.refreshes = String(refreshes);
    } catch (e) {
      if (mine === view) setConnection(false, String(e.message || e));
    } finally {
      if (mine === view) {
        clearTimeout(timer);
        timer = setTimeout(tick, REFRESH_MS);
      }
    }
  }

  // Moves to another page (or prefix) and loads it at once; the load of the
  // view left, if still in flight, is cancelled.
  function go(cursor) {
    view += 1;
    after = cursor;
    next = null;
    $('prev').disabled = true;
    $('next').disabled = true;
    clearTimeout(timer);
    if (loading) loading.abort();
    tick();
  }

  $('next').addEventListener('click', () => {
    if (next === null) return;
    before.push(after);
    go(next);
  });
  $('prev').addEventListener('click', () => {
    if (before.length === 0) return;
    go(before.pop());
  });

  // Search: what is typed becomes the prefix once typing pauses (or at
  // Enter); Escape clears it. Text that cannot start a name is flagged and
  // changes nothing.
  const search = $('search');
  let searchTimer = null;

  function applySearch() {
    clearTimeout(searchTimer);
    const text = search.value.trim();
    const valid = text === '' || PREFIX.test(text);
    search.setAttribute('aria-invalid', valid ? 'false' : 'true');
    $('search-hint').hidden = valid;
    if (!valid) return;
    const wanted = text === '' ? null : text;
    if (wanted === prefix) return;
    prefix = wanted;
    before = [];
    const url = new URL(window.location.href);
    if (prefix === null) url.searchParams.delete('prefix');
    else url.searchParams.set('prefix', prefix);
    window.history.replaceState(null, '', url);
    go(null);
  }

  search.addEventListener('input', () => {
    clearTimeout(searchTimer);
    searchTimer = setTimeout(applySearch, SEARCH_DEBOUNCE_MS);
  });
  search.addEventListener('keydown', (e) => {
    if (e.key === 'Enter') {
      e.preventDefault();
      applySearch();
    } else if (e.key === 'Escape') {
      search.value = '';
      applySearch();
    }
  });

  const size = $('page-size');
  size.value = String(pageSize);
  size.addEventListener('change', () => {
    const chosen = Number(size.value);
    if (!SIZES.includes(chosen) || chosen === pageSize) return;
    pageSize = chosen;
    before = [];
    const url = new URL(window.location.href);
    if (pageSize === SIZES[0]) url.searchParams.delete('limit');
    else url.searchParams.set('limit', String(pageSize));
    window.history.replaceState(null, '', url);
    go(null);
  });

  const linked = new URLSearchParams(window.location.search).get('prefix');
  if (linked !== null) {
    search.value = linked;
    const valid = PREFIX.test(linked);
    search.setAttribute('aria-invalid', valid ? 'false' : 'true');
    $('search-hint').hidden = valid;
    if (valid) prefix = linked;
  }

  tick();
})();
