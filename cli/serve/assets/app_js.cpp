// The dashboard's script. Everything the server sends is data: it goes into the page through
// textContent and attributes set one by one, never through innerHTML, so a queue named
// <img src=x onerror=...> shows as those characters. The page's Content-Security-Policy
// (routes.cpp) would stop an inline script anyway; this keeps the markup right as well.
#include "../assets.hpp"

namespace pgqueue_cli::dashboard {

const std::string_view app_js = R"js('use strict';
(() => {
  const tokenMeta = document.querySelector('meta[name="pgqueue-token"]');
  const token = tokenMeta ? tokenMeta.content : null;  // present only with --allow-actions
  const $ = (id) => document.getElementById(id);
  let timer = null, busy = false, again = false, interval = 2000, messageUntil = 0;

  // An element with text and attributes; children appended as given.
  function el(tag, text, attrs, ...children) {
    const e = document.createElement(tag);
    if (text !== undefined && text !== null) e.textContent = String(text);
    for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, v);
    for (const c of children) e.append(c);
    return e;
  }
  function cell(col, text, cls) {
    const td = el('td', text, cls ? { class: cls } : {});
    td.dataset.col = col;
    return td;
  }
  function num(v) { return v === null || v === undefined ? '–' : String(v); }
  function rate(v) { return v === null || v === undefined ? '–' : v.toFixed(v < 10 ? 1 : 0); }
  function age(s) {
    if (s === null || s === undefined) return '–';
    if (s < 60) return s.toFixed(1) + ' s';
    if (s < 3600) return (s / 60).toFixed(1) + ' min';
    if (s < 86400) return (s / 3600).toFixed(1) + ' h';
    return (s / 86400).toFixed(1) + ' d';
  }
  function clock(t) { return new Date(t * 1000).toLocaleTimeString(); }
  // An action's outcome stays up for a few seconds before "updated ..." replaces it.
  function say(text, bad) {
    setStatus(text, bad);
    messageUntil = Date.now() + 5000;
  }
  function setStatus(text, bad) {
    $('status').textContent = text;
    $('status').classList.toggle('bad', !!bad);
  }

  function button(action, label, body) {
    const b = el('button', label, { type: 'button' });
    b.dataset.action = action;
    b.addEventListener('click', () => act(action, body, b));
    return b;
  }

  async function act(action, body, b) {
    b.disabled = true;
    try {
      const r = await fetch('/api/' + action, {
        method: 'POST',
        headers: { 'Content-Type': 'application/json', 'X-PGQueue-Token': token },
        body: JSON.stringify(body),
      });
      const answer = await r.json().catch(() => ({}));
      if (!r.ok) {
        say(action + ' refused: ' + (answer.error || r.status), true);
      } else {
        say(describe(action, body, answer), false);
      }
    } catch (e) {
      say(action + ' failed: ' + e, true);
    }
    refresh();
  }

  function describe(action, body, answer) {
    switch (action) {
      case 'pause': return body.queue + (answer.changed ? ' paused' : ' was paused already');
      case 'resume': return body.queue + (answer.changed ? ' resumed' : ' was not paused');
      case 'retry': return 'retried ' + answer.retried + ' dead job(s) of ' + body.queue;
      case 'cancel': return 'job ' + body.id + (answer.cancelled ? ' cancelled' : ' not cancelled (no longer ready)');
    }
    return action + ' done';
  }

  function queueRow(q) {
    const tr = el('tr', null, q.paused ? { class: 'paused' } : {});
    tr.append(cell('queue', q.queue, 'name'), cell('state', q.paused ? 'paused' : 'running'));
    for (const k of ['ready', 'scheduled', 'claimed', 'dead', 'cancelled', 'done', 'waiting']) {
      tr.append(cell(k, num(q[k]), 'num' + (k === 'dead' && q.dead > 0 ? ' alert' : '')));
    }
    tr.append(cell('oldest_ready_age', age(q.oldest_ready_age_s), 'num'),
              cell('lag', age(q.lag_s), 'num'),
              cell('enqueued_per_s', rate(q.enqueued_per_s), 'num'),
              cell('done_per_s', rate(q.done_per_s), 'num'),
              cell('failed_per_s', rate(q.failed_per_s), 'num'));
    const actions = cell('actions', null, 'actions');
    if (token) {
      actions.append(q.paused ? button('resume', 'resume', { queue: q.queue })
                              : button('pause', 'pause', { queue: q.queue }));
      if (q.dead > 0) actions.append(button('retry', 'retry dead', { queue: q.queue }));
    }
    tr.append(actions);
    return tr;
  }

  function errorsOf(job) {
    const box = el('div', null, { class: 'errors' });
    box.append(el('div', job.last_error === null ? '–' : job.last_error, { class: 'last-error' }));
    const history = Array.isArray(job.errors) ? job.errors : [];
    if (history.length > 0) {
      const list = el('ol', null, { class: 'history' });
      for (const e of history) {
        list.append(el('li', 'attempt ' + e.attempt + ' at ' + e.at + ' by ' +
                              (e.holder === null ? '–' : e.holder) + ': ' +
                              (e.error === null ? '–' : e.error)));
      }
      box.append(el('details', null, {}, el('summary', history.length + ' failure(s)'), list));
    }
    return box;
  }

  function deadRow(j, now) {
    const tr = el('tr');
    tr.append(cell('id', j.id, 'num'), cell('queue', j.queue, 'name'),
              cell('attempts', j.attempts + '/' + j.max_attempts, 'num'),
              cell('died', j.finished_at === null ? '–' : age(now - j.finished_at) + ' ago'));
    const errors = cell('errors', null);
    errors.append(errorsOf(j));
    tr.append(errors, cell('payload', j.payload, 'payload'));
    const actions = cell('actions', null, 'actions');
    if (token) actions.append(button('retry', 'retry', { queue: j.queue, ids: [j.id] }));
    tr.append(actions);
    return tr;
  }

  function nextRow(j) {
    const tr = el('tr');
    tr.append(cell('id', j.id, 'num'), cell('queue', j.queue, 'name'),
              cell('priority', j.priority, 'num'),
              cell('due', j.scheduled ? 'in ' + age(j.due_in_s) : 'now'),
              cell('attempts', j.attempts, 'num'), cell('payload', j.payload, 'payload'));
    const actions = cell('actions', null, 'actions');
    if (token) actions.append(button('cancel', 'cancel', { id: j.id }));
    tr.append(actions);
    return tr;
  }

  const SVG = 'http://www.w3.org/2000/svg';
  function drawChart(samples) {
    const svg = $('chart');
    const w = 800, h = 180;
    const max = Math.max(1, ...samples.flatMap((s) => [s.enqueued_per_s, s.done_per_s, s.failed_per_s]));
    const parts = [];
    for (let i = 1; i < 4; ++i) {
      const grid = document.createElementNS(SVG, 'line');
      for (const [k, v] of Object.entries({ x1: 0, x2: w, y1: h * i / 4, y2: h * i / 4 })) grid.setAttribute(k, v);
      grid.setAttribute('class', 'grid');
      parts.push(grid);
    }
    if (samples.length > 1) {
      const t0 = samples[0].t, span = Math.max(1e-9, samples[samples.length - 1].t - t0);
      for (const key of ['enqueued', 'done', 'failed']) {
        const line = document.createElementNS(SVG, 'polyline');
        line.setAttribute('points', samples.map((s) =>
          ((s.t - t0) / span * w).toFixed(1) + ',' + (h - s[key + '_per_s'] / max * (h - 4)).toFixed(1)).join(' '));
        line.setAttribute('class', 'series ' + key);
        parts.push(line);
      }
      $('chart-from').textContent = clock(t0);
      $('chart-to').textContent = clock(t0 + span);
    }
    $('chart-max').textContent = 'max ' + rate(max) + '/s';
    svg.replaceChildren(...parts);
  }

  function render(d) {
    $('mode').textContent = d.actions ? 'actions allowed' : 'read-only';
    $('mode').className = d.actions ? 'actions-on' : 'read-only';
    $('queues').tBodies[0].replaceChildren(...d.queues.map(queueRow));
    $('queues-empty').hidden = d.queues.length > 0;
    drawChart(d.samples);
    $('dead').tBodies[0].replaceChildren(...d.dead.map((j) => deadRow(j, d.time)));
    $('dead-empty').hidden = d.dead.length > 0;
    const deadTotal = d.queues.reduce((n, q) => n + q.dead, 0);
    $('dead-note').textContent = d.dead.length < deadTotal
      ? 'the newest ' + d.dead.length + ' of ' + deadTotal : '';
    $('next').tBodies[0].replaceChildren(...d.next.map(nextRow));
    $('next-empty').hidden = d.next.length > 0;
  }

  // One request at a time; a refresh asked for meanwhile (after an action) runs right after.
  async function refresh() {
    if (busy) { again = true; return; }
    busy = true;
    clearTimeout(timer);
    try {
      const r = await fetch('/api/dashboard', { cache: 'no-store' });
      const d = await r.json();
      if (!r.ok) throw new Error(d.error || r.status);
      render(d);
      interval = Math.max(500, d.interval_s * 1000);
      if (Date.now() > messageUntil) setStatus('updated ' + clock(d.time), false);
    } catch (e) {
      setStatus('cannot read the queues: ' + e.message, true);
    } finally {
      busy = false;
      if (again) {
        again = false;
        refresh();
      } else {
        timer = setTimeout(refresh, interval);
      }
    }
  }
  refresh();
})();
)js";

}  // namespace pgqueue_cli::dashboard
