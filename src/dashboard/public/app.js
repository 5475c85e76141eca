(function () {
  'use strict';
  var meta = document.querySelector('meta[name="csrf-token"]');
  var csrf = meta ? meta.getAttribute('content') : '';
  var FINAL_WAIT = ['queued', 'retrying'];

  function $(sel, root) {
    return (root || document).querySelector(sel);
  }
  function $all(sel, root) {
    return Array.prototype.slice.call((root || document).querySelectorAll(sel));
  }
  function text(el, value) {
    if (el) el.textContent = String(value);
  }
  var numberFormat = new Intl.NumberFormat('en-US');
  function num(n) {
    return numberFormat.format(n || 0);
  }

  function setProgress(id, p) {
    var box = $all('[data-progress]').filter(function (e) {
      return e.getAttribute('data-progress') === id;
    })[0];
    if (!box) return;
    var t = p.total || 0;
    var pc = function (n) {
      return t > 0 ? (100 * n) / t : 0;
    };
    var rects = $all('rect', box);
    var d = pc(p.done),
      f = pc(p.failed),
      w = pc(p.waiting);
    if (rects[1]) rects[1].setAttribute('width', d);
    if (rects[2]) {
      rects[2].setAttribute('x', d);
      rects[2].setAttribute('width', f);
    }
    if (rects[3]) {
      rects[3].setAttribute('x', d + f);
      rects[3].setAttribute('width', w);
    }
    ['done', 'failed', 'waiting', 'cancelled', 'total'].forEach(function (k) {
      text($('[data-k="' + k + '"]', box), num(p[k]));
    });
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

  function byAttr(name, value) {
    return $all('[' + name + ']').filter(function (e) {
      return e.getAttribute(name) === value;
    });
  }

  // The cards are the server's: an organization that changed state, or a page whose organizations are
  // no longer the ones shown (ranked anew), asks for a reload instead of reshuffling under the reader.
  function checkCards(o) {
    var cards = $all('#org-cards > section[data-org]');
    if (!cards.length && !o.pageOrgs) return;
    var shown = cards.map(function (c) {
      return c.getAttribute('data-org');
    });
    var changed = o.pageOrgs && shown.join(',') !== o.pageOrgs.join(',');
    (o.orgs || []).forEach(function (org) {
      cards.forEach(function (c) {
        if (c.getAttribute('data-org') === org.org && c.getAttribute('data-state') !== org.state)
          changed = true;
      });
    });
    var note = $('#list-changed');
    if (note && changed) note.hidden = false;
  }

  // The burn-down charts come drawn by the server (escaped SVG, views/burn-down.ts): swapped in whole.
  function setCharts(charts) {
    Object.keys(charts).forEach(function (key) {
      byAttr('data-burn-down', key).forEach(function (fig) {
        var old = $('svg', fig);
        var box = document.createElement('div');
        box.innerHTML = charts[key];
        var svg = $('svg', box);
        if (old && svg) fig.replaceChild(svg, old);
      });
    });
  }

  // A frame is the view's overview, whole (full) or with only the organizations and runs that changed.
  function applyOverview(o) {
    text($('#updated-at'), o.at);
    renderAlerts(o.alerts || []);
    var more = $('#alerts-more');
    if (more && typeof o.alertsTotal === 'number') {
      var hidden = o.alertsTotal - (o.alerts || []).length;
      text($('[data-alerts-more]', more), hidden);
      more.hidden = hidden <= 0;
    }
    if (o.summary) text($('#fleet-summary'), o.summary.text);
    checkCards(o);
    setCharts(o.charts || {});
    (o.orgs || []).forEach(function (org) {
      setProgress('org:' + org.org, org.progress);
      byAttr('data-remaining', org.org).forEach(function (e) {
        text(e, num(org.remaining));
      });
      if (org.burnDown)
        byAttr('data-finish', 'org:' + org.org).forEach(function (e) {
          text(e, org.burnDown.finishText);
        });
      byAttr('data-eta', org.org).forEach(function (e) {
        text(e, org.eta.text);
      });
      byAttr('data-jobs', org.org).forEach(function (e) {
        var j = org.jobs;
        text(
          e,
          'jobs: ' +
            num(j.waiting) +
            ' waiting, ' +
            num(j.delayed) +
            ' delayed, ' +
            num(j.active) +
            ' active',
        );
      });
    });
    (o.runs || []).forEach(function (r) {
      setProgress('run:' + r.id, r.progress);
      if (r.burnDown)
        byAttr('data-finish', 'run:' + r.id).forEach(function (e) {
          text(e, r.burnDown.finishText);
        });
      Object.keys(r.byOrg || {}).forEach(function (org) {
        setProgress('run:' + r.id + ':' + org, r.byOrg[org].progress);
      });
    });
  }

  function live() {
    if (!$('#updated-at')) return;
    var state = $('#live-state');
    // The view (filter, page) is the page's own query: the stream and the poll follow it.
    var view = window.location.search;
    var poll = function () {
      fetch('/api/overview' + view, { credentials: 'same-origin' })
        .then(function (r) {
          return r.json();
        })
        .then(applyOverview)
        .catch(function () {});
    };
    if (window.EventSource) {
      var es = new EventSource('/api/live' + view);
      es.addEventListener('overview', function (ev) {
        applyOverview(JSON.parse(ev.data));
        text(state, '(live)');
      });
      es.onerror = function () {
        text(state, '(reconnecting)');
      };
    } else {
      setInterval(poll, 5000);
    }
  }

  // A refused request rejects with the dashboard's answer: its message, and its code (docs/errors.md).
  class ApiError extends Error {
    constructor(status, body) {
      super(body.message || 'HTTP ' + status);
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
      return r.json().then(function (j) {
        if (!r.ok) throw new ApiError(r.status, j);
        return j;
      });
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
        .then(function (r) {
          return r.json();
        })
        .then(function (j) {
          var pending = 0;
          (j.learners || []).forEach(function (l) {
            var key = l.org + ':' + l.learnerId;
            $all('[data-learner]').forEach(function (row) {
              if (row.tagName === 'TR' && row.getAttribute('data-learner') === key)
                setState($('[data-state]', row), l.state);
            });
            if (keys.length === 1) setState($('main > p [data-state]'), l.state);
            if (FINAL_WAIT.indexOf(l.state) >= 0) pending++;
          });
          if (pending > 0 && Date.now() - started < 30 * 60 * 1000) setTimeout(tick, 1000);
        })
        .catch(function () {
          setTimeout(tick, 3000);
        });
    };
    tick();
  }

  function result(msg) {
    text($('#retry-result'), msg);
  }

  function summary(s) {
    return (
      're-queued ' +
      s.requeued +
      (s.skipped && s.skipped.length ? ', ' + s.skipped.length + ' not retryable' : '')
    );
  }

  // After a retry: its summary, the rows re-queued, and those learners followed until they move.
  function retried(s, keys) {
    result(summary(s));
    keys.forEach(function (k) {
      $all('tr[data-learner]').forEach(function (row) {
        if (row.getAttribute('data-learner') === k) setState($('[data-state]', row), 'queued');
      });
    });
    follow(keys);
  }

  function retryFailed(e) {
    result('retry failed: ' + e.message);
  }

  function retryKeys(keys) {
    post({ learners: keys })
      .then(function (s) {
        retried(s, keys);
      })
      .catch(retryFailed);
  }

  function failures() {
    var boxes = $all('input[name="learner"]');
    var selAll = $('#select-all');
    var btnSel = $('#retry-selected');
    var count = function () {
      var n = boxes.filter(function (b) {
        return b.checked;
      }).length;
      text($('#selected-count'), n);
      if (btnSel) btnSel.disabled = n === 0;
    };
    boxes.forEach(function (b) {
      b.addEventListener('change', count);
    });
    if (selAll)
      selAll.addEventListener('change', function () {
        boxes.forEach(function (b) {
          b.checked = selAll.checked;
        });
        count();
      });
    if (btnSel)
      btnSel.addEventListener('click', function () {
        var keys = boxes
          .filter(function (b) {
            return b.checked;
          })
          .map(function (b) {
            return b.value;
          });
        if (
          keys.length &&
          window.confirm('Retry ' + keys.length + ' selected learner' + (keys.length === 1 ? '' : 's') + '?')
        )
          retryKeys(keys);
      });
    $all('button.retry-one').forEach(function (b) {
      b.addEventListener('click', function () {
        retryKeys([b.getAttribute('data-learner')]);
      });
    });
    var all = $('#retry-all');
    var actions = $('#retry-actions');
    if (all && actions)
      all.addEventListener('click', function () {
        var total = Number(actions.getAttribute('data-total'));
        var filter = JSON.parse(actions.getAttribute('data-filter') || '{}');
        if (!window.confirm('Retry all ' + total + ' learners that match this filter?')) return;
        var body = { all: true };
        Object.keys(filter).forEach(function (k) {
          if (filter[k]) body[k] = filter[k];
        });
        post(body)
          .then(function (s) {
            retried(
              s,
              $all('tr[data-learner]').map(function (row) {
                return row.getAttribute('data-learner');
              }),
            );
          })
          .catch(retryFailed);
      });
  }

  document.addEventListener('DOMContentLoaded', function () {
    live();
    failures();
  });
})();
