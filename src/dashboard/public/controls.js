(function () {
  'use strict';
  var meta = document.querySelector('meta[name="csrf-token"]');
  var csrf = meta ? meta.getAttribute('content') : '';

  function sectionIn(root, org) {
    var all = root.querySelectorAll('section[data-org]');
    for (var i = 0; i < all.length; i++) if (all[i].getAttribute('data-org') === org) return all[i];
    return null;
  }

  function say(org, msg, bad) {
    var sec = sectionIn(document, org);
    var out = sec && sec.querySelector('[data-result]');
    if (!out) return;
    out.textContent = String(msg);
    out.className = bad ? 'error' : 'muted';
  }

  function busy(org, on) {
    var sec = sectionIn(document, org);
    if (!sec) return;
    Array.prototype.forEach.call(sec.querySelectorAll('button'), function (b) {
      b.disabled = on;
    });
  }

  // The section as the server renders it now: one template, escaped on the server.
  function reload(org, msg, bad) {
    return fetch('/controls?org=' + encodeURIComponent(org), { credentials: 'same-origin' })
      .then(function (r) {
        return r.text();
      })
      .then(function (text) {
        var fresh = sectionIn(new DOMParser().parseFromString(text, 'text/html'), org);
        var old = sectionIn(document, org);
        if (fresh && old) old.parentNode.replaceChild(document.importNode(fresh, true), old);
        say(org, msg, bad);
      })
      .catch(function () {
        say(org, msg + ' (reload the page to see it)', bad);
      });
  }

  function post(org, path, body) {
    busy(org, true);
    say(org, 'sending...', false);
    return fetch('/api/controls/' + path, {
      method: 'POST',
      credentials: 'same-origin',
      headers: { 'content-type': 'application/json', 'x-csrf-token': csrf },
      body: JSON.stringify(body),
    })
      .then(function (r) {
        return r.json().then(
          function (j) {
            return { ok: r.ok, j: j };
          },
          function () {
            return { ok: false, j: { message: 'HTTP ' + r.status } };
          },
        );
      })
      .then(function (res) {
        if (!res.ok) {
          busy(org, false);
          say(org, 'refused: ' + (res.j.message || 'error'), true);
          return;
        }
        var msg =
          res.j.message + ((res.j.warnings || []).length ? ' - warning: ' + res.j.warnings.join('; ') : '');
        return reload(org, msg, (res.j.warnings || []).length > 0);
      })
      .catch(function (e) {
        busy(org, false);
        say(org, 'not sent: ' + e.message, true);
      });
  }

  document.addEventListener('click', function (ev) {
    var b = ev.target && ev.target.closest ? ev.target.closest('button[data-action]') : null;
    if (!b) return;
    var org = b.getAttribute('data-org');
    var token = b.getAttribute('data-token');
    var action = b.getAttribute('data-action');
    if (action === 'reset') {
      if (
        window.confirm(
          'Reset the limits of ' +
            org +
            " to this dashboard's LIMIT_*? Token limits of their own and the reserve are removed.",
        )
      )
        post(org, 'limits/reset', { org: org });
      return;
    }
    if (
      action === 'pause' &&
      !token &&
      !window.confirm('Pause every transfer of ' + org + ' on every worker?')
    )
      return;
    var body = { org: org };
    if (token) body.token = token;
    post(org, action, body);
  });

  document.addEventListener('submit', function (ev) {
    var form = ev.target;
    if (!form || !form.classList || !form.classList.contains('limits-form')) return;
    ev.preventDefault();
    var org = form.getAttribute('data-org');
    var body = { org: org };
    ['perOrg', 'perToken', 'token', 'reserve'].forEach(function (name) {
      var el = form.elements.namedItem(name);
      var v = el && el.value ? el.value.trim() : '';
      if (v) body[name] = v;
    });
    post(org, 'limits', body);
  });
})();
