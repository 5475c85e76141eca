// The stylesheet and the script of the pages, served from /assets: no build step, and same-origin files
// let the Content-Security-Policy forbid inline scripts. The script is plain ES2017 for any browser.

export const CSS = `
:root{--ok:#1a7f37;--bad:#cf222e;--wait:#9a6700;--bg:#fff;--fg:#1f2328;--muted:#656d76;--line:#d0d7de;font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif}
*{box-sizing:border-box}body{margin:0;color:var(--fg);background:var(--bg);line-height:1.4}
header{display:flex;flex-wrap:wrap;gap:.5rem 1rem;align-items:center;padding:.6rem 1rem;border-bottom:1px solid var(--line);background:#f6f8fa}
nav a{margin-right:.8rem}nav a[aria-current=page]{font-weight:bold;text-decoration:none}
main{padding:1rem;max-width:1200px;margin:auto}h1{font-size:1.4rem;margin:.2rem 0 .6rem}h2{font-size:1.15rem;margin-top:1.5rem}h3{font-size:1rem;margin:.2rem 0}
.muted{color:var(--muted)}.badge{background:#ddf4ff;border:1px solid #54aeff;border-radius:1rem;padding:0 .5rem;font-size:.8rem}
.cards{display:grid;grid-template-columns:repeat(auto-fill,minmax(min(100%,340px),1fr));gap:1rem}
.card{border:1px solid var(--line);border-radius:6px;padding:.8rem;overflow:hidden}
.progress svg{width:100%;height:14px;display:block;border-radius:3px}.legend{font-size:.85rem;display:flex;flex-wrap:wrap;gap:.2rem .8rem}
.bar-bg{fill:#eaeef2}.bar-done{fill:var(--ok)}.bar-failed{fill:var(--bad)}.bar-waiting{fill:#d4a72c}.bar-other{fill:#afb8c1}
.k-done b{color:var(--ok)}.k-failed b{color:var(--bad)}.k-waiting b{color:var(--wait)}
.chart svg{width:100%;height:70px;background:#f6f8fa}.chart{margin:.5rem 0}figcaption{font-size:.8rem;color:var(--muted)}
table{border-collapse:collapse;width:100%;font-size:.9rem}th,td{border-bottom:1px solid var(--line);padding:.3rem .4rem;text-align:left;vertical-align:top}
.table-wrap{overflow-x:auto}.message{max-width:28rem;word-break:break-word}
.counts{list-style:none;padding:0;margin:0;display:flex;flex-wrap:wrap;gap:.2rem .8rem}
.code{font-family:ui-monospace,monospace;font-size:.85em;padding:0 .3rem;border-radius:3px;background:#eaeef2}
.code-transferred,.code-already-in-org{background:#dafbe1;color:var(--ok)}.code-queued,.code-retrying{background:#fff8c5;color:var(--wait)}
.code-not-found,.code-forbidden,.code-invalid-request,.code-server-error,.code-network-error,.code-bad-response,.code-unexpected-result{background:#ffebe9;color:var(--bad)}
.alert{padding:.5rem .8rem;border-radius:6px;margin:.4rem 0}.alert-error{background:#ffebe9;border:1px solid #ff8182;color:#82071e}
.alert-warning{background:#fff8c5;border:1px solid #d4a72c}
.filters{display:flex;flex-wrap:wrap;gap:.5rem 1rem;align-items:end;margin-bottom:.6rem}.filters label{display:flex;flex-direction:column;font-size:.85rem}
.actions{display:flex;flex-wrap:wrap;gap:.5rem;align-items:center;margin:.5rem 0}
button{padding:.35rem .7rem;border:1px solid var(--line);border-radius:6px;background:#f6f8fa;cursor:pointer;font:inherit}button:disabled{opacity:.5;cursor:default}
input,select{font:inherit;padding:.25rem}.pager{margin:.8rem 0;display:flex;gap:1rem}
.timeline{padding-left:1.2rem}pre{white-space:pre-wrap;word-break:break-word;font-size:.8rem;background:#f6f8fa;padding:.5rem}
@media (max-width:600px){main{padding:.5rem}th:nth-child(6),td.message{max-width:12rem}}
`;

export const JS = `
(function () {
  'use strict';
  var meta = document.querySelector('meta[name="csrf-token"]');
  var csrf = meta ? meta.getAttribute('content') : '';
  var FINAL_WAIT = ['queued', 'retrying'];

  function $(sel, root) { return (root || document).querySelector(sel); }
  function $all(sel, root) { return Array.prototype.slice.call((root || document).querySelectorAll(sel)); }
  function text(el, value) { if (el) el.textContent = String(value); }

  function setProgress(id, p) {
    var box = $all('[data-progress]').filter(function (e) { return e.getAttribute('data-progress') === id; })[0];
    if (!box) return;
    var t = p.total || 0;
    var pc = function (n) { return t > 0 ? (100 * n) / t : 0; };
    var rects = $all('rect', box);
    var d = pc(p.done), f = pc(p.failed), w = pc(p.waiting);
    if (rects[1]) rects[1].setAttribute('width', d);
    if (rects[2]) { rects[2].setAttribute('x', d); rects[2].setAttribute('width', f); }
    if (rects[3]) { rects[3].setAttribute('x', d + f); rects[3].setAttribute('width', w); }
    ['done', 'failed', 'waiting', 'total'].forEach(function (k) { text($('[data-k="' + k + '"]', box), p[k]); });
  }

  function renderAlerts(alerts) {
    var box = $('#alerts');
    if (!box) return;
    box.textContent = '';
    alerts.forEach(function (a) {
      var p = document.createElement('p');
      p.className = 'alert alert-' + a.level;
      p.textContent = a.message;
      box.appendChild(p);
    });
  }

  function applyOverview(o) {
    text($('#updated-at'), o.at);
    renderAlerts(o.alerts || []);
    (o.orgs || []).forEach(function (org) {
      setProgress('org:' + org.org, org.progress);
      $all('[data-remaining]').forEach(function (e) { if (e.getAttribute('data-remaining') === org.org) text(e, org.remaining); });
      $all('[data-eta]').forEach(function (e) { if (e.getAttribute('data-eta') === org.org) text(e, org.eta.text); });
    });
    (o.runs || []).forEach(function (r) {
      setProgress('run:' + r.id, r.progress);
      Object.keys(r.byOrg || {}).forEach(function (org) { setProgress('run:' + r.id + ':' + org, r.byOrg[org].progress); });
    });
  }

  function live() {
    if (!$('#updated-at')) return;
    var state = $('#live-state');
    var poll = function () {
      fetch('/api/overview', { credentials: 'same-origin' }).then(function (r) { return r.json(); }).then(applyOverview).catch(function () {});
    };
    if (window.EventSource) {
      var es = new EventSource('/api/live');
      es.addEventListener('overview', function (ev) { applyOverview(JSON.parse(ev.data)); text(state, '(live)'); });
      es.onerror = function () { text(state, '(reconnecting)'); };
    } else {
      setInterval(poll, 5000);
    }
  }

  // A refused request rejects with the dashboard's answer: its message, and its code (docs/errors.md).
  class ApiError extends Error {
    constructor(status, body) {
      super(body.message || ('HTTP ' + status));
      this.code = body.error;
      this.status = status;
    }
  }

  function post(body) {
    return fetch('/api/retry', {
      method: 'POST',
      credentials: 'same-origin',
      headers: { 'content-type': 'application/json', 'x-csrf-token': csrf },
      body: JSON.stringify(body),
    }).then(function (r) {
      return r.json().then(function (j) { if (!r.ok) throw new ApiError(r.status, j); return j; });
    });
  }

  function setState(el, state) {
    if (!el) return;
    el.textContent = state;
    el.className = 'code code-' + state;
  }

  // Follows retried learners: back to waiting at once, then to their new outcome as workers record it.
  function follow(keys) {
    if (!keys.length) return;
    var started = Date.now();
    var tick = function () {
      var ids = keys.slice(0, 500).join(',');
      fetch('/api/learners?ids=' + encodeURIComponent(ids), { credentials: 'same-origin' })
        .then(function (r) { return r.json(); })
        .then(function (j) {
          var pending = 0;
          (j.learners || []).forEach(function (l) {
            var key = l.org + ':' + l.learnerId;
            $all('[data-learner]').forEach(function (row) {
              if (row.tagName === 'TR' && row.getAttribute('data-learner') === key) setState($('[data-state]', row), l.state);
            });
            if (keys.length === 1) setState($('main > p [data-state]'), l.state);
            if (FINAL_WAIT.indexOf(l.state) >= 0) pending++;
          });
          if (pending > 0 && Date.now() - started < 30 * 60 * 1000) setTimeout(tick, 1000);
        })
        .catch(function () { setTimeout(tick, 3000); });
    };
    tick();
  }

  function result(msg) { text($('#retry-result'), msg); }

  function summary(s) {
    return 're-queued ' + s.requeued + (s.skipped && s.skipped.length ? ', ' + s.skipped.length + ' not retryable' : '');
  }

  function retryKeys(keys) {
    post({ learners: keys }).then(function (s) {
      result(summary(s));
      keys.forEach(function (k) {
        $all('tr[data-learner]').forEach(function (row) { if (row.getAttribute('data-learner') === k) setState($('[data-state]', row), 'queued'); });
      });
      follow(keys);
    }).catch(function (e) { result('retry failed: ' + e.message); });
  }

  function failures() {
    var boxes = $all('input[name="learner"]');
    var selAll = $('#select-all');
    var btnSel = $('#retry-selected');
    var count = function () {
      var n = boxes.filter(function (b) { return b.checked; }).length;
      text($('#selected-count'), n);
      if (btnSel) btnSel.disabled = n === 0;
    };
    boxes.forEach(function (b) { b.addEventListener('change', count); });
    if (selAll) selAll.addEventListener('change', function () { boxes.forEach(function (b) { b.checked = selAll.checked; }); count(); });
    if (btnSel) btnSel.addEventListener('click', function () {
      var keys = boxes.filter(function (b) { return b.checked; }).map(function (b) { return b.value; });
      if (keys.length && window.confirm('Retry ' + keys.length + ' selected learner' + (keys.length === 1 ? '' : 's') + '?')) retryKeys(keys);
    });
    $all('button.retry-one').forEach(function (b) {
      b.addEventListener('click', function () { retryKeys([b.getAttribute('data-learner')]); });
    });
    var all = $('#retry-all');
    var actions = $('#retry-actions');
    if (all && actions) all.addEventListener('click', function () {
      var total = Number(actions.getAttribute('data-total'));
      var filter = JSON.parse(actions.getAttribute('data-filter') || '{}');
      if (!window.confirm('Retry all ' + total + ' learners that match this filter?')) return;
      var body = { all: true };
      Object.keys(filter).forEach(function (k) { if (filter[k]) body[k] = filter[k]; });
      post(body).then(function (s) {
        result(summary(s));
        var keys = $all('tr[data-learner]').map(function (row) { return row.getAttribute('data-learner'); });
        keys.forEach(function (k) {
          $all('tr[data-learner]').forEach(function (row) { if (row.getAttribute('data-learner') === k) setState($('[data-state]', row), 'queued'); });
        });
        follow(keys);
      }).catch(function (e) { result('retry failed: ' + e.message); });
    });
  }

  document.addEventListener('DOMContentLoaded', function () { live(); failures(); });
})();
`;
