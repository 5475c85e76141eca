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

  // The cards are the server's: a changed state, or a page whose organizations were ranked anew,
  // asks for a reload instead of reshuffling under the reader.
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

  // The burn-down charts come drawn by the server (escaped SVG): swapped in whole.
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

  // A frame is the view's overview, whole (full) or with only what changed.
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
      // The finish is the line above (data-finish): this one says only what holds it back.
      byAttr('data-eta', org.org).forEach(function (e) {
        text(e, org.eta.note || '');
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
      // "(live)" once the stream's first frame came, not before; data-frames counts the frames applied
      // (what a test waits on, rather than on time).
      var frames = 0;
      text(state, '(connecting)');
      var es = new EventSource('/api/live' + view);
      es.addEventListener('overview', function (ev) {
        applyOverview(JSON.parse(ev.data));
        frames += 1;
        if (state) state.setAttribute('data-frames', String(frames));
        text(state, '(live)');
      });
      es.onerror = function () {
        text(state, '(reconnecting)');
      };
    } else {
      setInterval(poll, 5000);
    }
  }

  // A refused request rejects with the dashboard's answer: its message and code (docs/errors.md).
  class ApiError extends Error {
    constructor(status, body) {
      super(body.message || 'HTTP ' + status);
      this.code = body.error;
      this.status = status;
    }
  }

  function post(body, path) {
    return fetch(path || '/api/retry', {
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

  function rowsOf(key) {
    return $all('tr[data-learner]').filter(function (row) {
      return row.getAttribute('data-learner') === key;
    });
  }

  // A row's cells from a learner's state: the attempt to come while waiting, else its outcome.
  function showRow(row, l) {
    setState($('[data-state]', row), l.state);
    var waiting = FINAL_WAIT.indexOf(l.state) >= 0;
    var att = $('[data-attempts]', row);
    if (att) {
      att.setAttribute('data-attempts', l.attempts);
      text(att, waiting ? l.attempts + ' · attempt ' + (l.attempts + 1) + ' to come' : l.attempts);
    }
    text($('[data-http]', row), waiting ? '' : l.httpStatus || '');
    text(
      $('[data-message]', row),
      waiting
        ? 're-queued'
        : [l.error, l.message]
            .filter(function (x) {
              return x;
            })
            .join(': '),
    );
    text($('[data-time]', row), l.updatedAt);
  }

  // Follows retried learners on this page until each reaches a new outcome: 1 s polls of their rows
  // only (at most 500 a page).
  function follow(keys) {
    var single = $('main > p [data-state]');
    keys = keys.filter(function (k) {
      return rowsOf(k).length > 0 || (single && keys.length === 1);
    });
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
            rowsOf(key).forEach(function (row) {
              showRow(row, l);
            });
            if (keys.length === 1) setState(single, l.state);
            if (FINAL_WAIT.indexOf(l.state) >= 0) pending++;
          });
          if (pending > 0 && Date.now() - started < 30 * 60 * 1000) setTimeout(tick, 1000);
        })
        .catch(function () {
          setTimeout(tick, 3000);
        });
    };
    setTimeout(tick, 1000);
  }

  function result(msg) {
    text($('#retry-result'), msg);
  }

  function countsText(byCode) {
    return Object.keys(byCode)
      .map(function (c) {
        return byCode[c] + ' ' + c;
      })
      .join(', ');
  }

  function plural(n, word) {
    return n + ' ' + word + (n === 1 ? '' : 's');
  }

  function summary(s) {
    var runs = Object.keys(s.runs || {});
    return (
      're-queued ' +
      s.requeued +
      (s.requeued ? ' (' + countsText(s.byCode) + ')' : '') +
      (runs.length ? ' into run ' + runs.join(', ') : '') +
      (s.skipped && s.skipped.length ? '; ' + s.skipped.length + ' not retryable' : '')
    );
  }

  // After a retry: its summary, and the re-queued rows (the POST names them) shown waiting at once,
  // then followed until they move.
  function retried(s) {
    result(summary(s));
    var keys = (s.learners || []).map(function (l) {
      rowsOf(l.key).forEach(function (row) {
        showRow(row, { state: 'queued', attempts: l.attempts, updatedAt: new Date().toISOString() });
      });
      return l.key;
    });
    if ((s.learners || []).length === 1) setState($('main > p [data-state]'), 'queued');
    follow(keys);
  }

  function retryFailed(e) {
    result('retry failed: ' + e.message);
  }

  function el(tag, attrs, content) {
    var e = document.createElement(tag);
    Object.keys(attrs || {}).forEach(function (k) {
      e.setAttribute(k, attrs[k]);
    });
    if (content !== undefined) e.textContent = content;
    return e;
  }

  // The confirmation <dialog>: the count and outcomes from the server's dry run (exact), and for
  // outcomes a retry cannot help a checkbox to tick first. `verb` names the action ('retry' by
  // default). Resolves true to go on.
  function ask(plan, verb) {
    verb = verb || 'retry';
    return new Promise(function (resolve) {
      var old = $('#retry-dialog');
      if (old) old.remove();
      var d = el('dialog', { id: 'retry-dialog', 'aria-labelledby': 'retry-dialog-title' });
      d.appendChild(
        el(
          'h2',
          { id: 'retry-dialog-title' },
          verb.charAt(0).toUpperCase() + verb.slice(1) + ' ' + plural(plan.matched, 'learner') + '?',
        ),
      );
      d.appendChild(
        el(
          'p',
          { id: 'retry-dialog-summary' },
          verb + ' ' + plural(plan.matched, 'learner') + ': ' + countsText(plan.byCode),
        ),
      );
      var check;
      if (plan.confirm.length) {
        var notes = {};
        plan.confirm.forEach(function (c) {
          var n = (plan.notes || {})[c] || '';
          (notes[n] = notes[n] || []).push(plan.byCode[c] + ' ' + c);
        });
        Object.keys(notes).forEach(function (n) {
          d.appendChild(el('p', { class: 'warn' }, notes[n].join(', ') + ': ' + n + '.'));
        });
        var label = el('label', { id: 'retry-dialog-confirm' });
        check = el('input', { type: 'checkbox', id: 'retry-anyway' });
        label.appendChild(check);
        label.appendChild(
          document.createTextNode(
            ' I know what ' + verb + ' does to ' + plan.confirm.join(', ') + ' (above): ' + verb + ' anyway',
          ),
        );
        d.appendChild(label);
      }
      var buttons = el('p', { class: 'dialog-buttons' });
      var cancel = el('button', { type: 'button', id: 'retry-dialog-cancel' }, 'cancel');
      var go = el(
        'button',
        { type: 'button', id: 'retry-dialog-go' },
        verb + ' ' + plural(plan.matched, 'learner'),
      );
      if (check) {
        go.disabled = true;
        check.addEventListener('change', function () {
          go.disabled = !check.checked;
        });
      }
      buttons.appendChild(cancel);
      buttons.appendChild(document.createTextNode(' '));
      buttons.appendChild(go);
      d.appendChild(buttons);
      document.body.appendChild(d);
      var done = function (ok) {
        d.close();
        d.remove();
        resolve(ok);
      };
      cancel.addEventListener('click', function () {
        done(false);
      });
      go.addEventListener('click', function () {
        done(true);
      });
      d.addEventListener('cancel', function () {
        done(false);
      });
      d.showModal();
      cancel.focus();
    });
  }

  // Every retry is a dry run first. A bulk retry, or one touching outcomes a retry cannot help, is
  // confirmed in the dialog; a single ordinary retry goes at once.
  function retry(body, bulk) {
    var dry = Object.assign({}, body, { dryRun: true });
    return post(dry)
      .then(function (plan) {
        if (plan.matched === 0) {
          result(
            'nothing to retry' +
              (plan.skipped && plan.skipped.length
                ? ': ' + plan.skipped[0].reason
                : ' (the rows moved on meanwhile)'),
          );
          return;
        }
        var confirm = plan.confirm.length > 0;
        var go = bulk || confirm ? ask(plan) : Promise.resolve(true);
        return go.then(function (ok) {
          if (!ok) return result('retry cancelled');
          result('retrying ' + plural(plan.matched, 'learner') + '…');
          return post(confirm ? Object.assign({}, body, { confirmPermanent: true }) : body).then(retried);
        });
      })
      .catch(retryFailed);
  }

  // Withdraw learners before their call: dry run, the dialog, then the cancel.
  function withdraw(body, status) {
    var dry = Object.assign({}, body, { dryRun: true });
    return post(dry, '/api/cancel')
      .then(function (plan) {
        var flying = plan.inFlight.length
          ? '; ' + plural(plan.inFlight.length, 'call') + ' in flight finish and are recorded'
          : '';
        if (plan.matched === 0) return text(status, 'nothing to withdraw' + flying);
        return ask(plan, 'cancel').then(function (ok) {
          if (!ok) return text(status, 'nothing withdrawn');
          return post(body, '/api/cancel').then(function (s) {
            text(
              status,
              'withdrew ' +
                plural(s.cancelled, 'learner') +
                (s.inFlight.length
                  ? '; ' + plural(s.inFlight.length, 'call') + ' in flight finish and are recorded'
                  : ''),
            );
            var single = $('main > p [data-state]');
            if (body.learners && single && s.cancelled > 0) setState(single, 'cancelled');
          });
        });
      })
      .catch(function (e) {
        text(status, 'cancel failed: ' + e.message);
      });
  }

  // Release a canary run's learners that await approval: dry run, the dialog, then the approval.
  function approve(run, status) {
    return post({ run: run, dryRun: true }, '/api/approve')
      .then(function (plan) {
        if (plan.matched === 0) return text(status, 'nothing waits for approval');
        return ask(plan, 'approve').then(function (ok) {
          if (!ok) return text(status, 'nothing released');
          return post({ run: run }, '/api/approve').then(function (s) {
            text(status, 'approved: released ' + plural(s.released, 'learner'));
          });
        });
      })
      .catch(function (e) {
        text(status, 'approve failed: ' + e.message);
      });
  }

  function approvals() {
    $all('button.approve-run').forEach(function (b) {
      b.addEventListener('click', function () {
        var run = b.getAttribute('data-run');
        approve(run, $('[data-approve-result="' + run + '"]'));
      });
    });
  }

  function cancels() {
    $all('button.cancel-run').forEach(function (b) {
      b.addEventListener('click', function () {
        var run = b.getAttribute('data-run');
        withdraw({ run: run }, $('[data-cancel-result="' + run + '"]'));
      });
    });
    $all('button.cancel-one').forEach(function (b) {
      b.addEventListener('click', function () {
        withdraw({ learners: [b.getAttribute('data-learner')] }, $('#cancel-result'));
      });
    });
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
        if (keys.length) retry({ learners: keys }, true);
      });
    $all('button.retry-one').forEach(function (b) {
      b.addEventListener('click', function () {
        retry({ learners: [b.getAttribute('data-learner')] }, false);
      });
    });
    var all = $('#retry-all');
    var actions = $('#retry-actions');
    if (all && actions)
      all.addEventListener('click', function () {
        var filter = JSON.parse(actions.getAttribute('data-filter') || '{}');
        var body = { all: true };
        Object.keys(filter).forEach(function (k) {
          if (filter[k]) body[k] = filter[k];
        });
        retry(body, true);
      });
  }

  document.addEventListener('DOMContentLoaded', function () {
    live();
    failures();
    cancels();
    approvals();
  });
})();
