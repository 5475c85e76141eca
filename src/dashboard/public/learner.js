(function () {
  'use strict';
  function start() {
    var button = document.getElementById('move-ahead');
    if (!button) return;
    var meta = document.querySelector('meta[name="csrf-token"]');
    var csrf = meta ? meta.getAttribute('content') : '';
    var out = document.getElementById('urgent-result');
    var place = document.querySelector('[data-queue]');
    var say = function (msg) {
      if (out) out.textContent = String(msg);
    };
    button.addEventListener('click', function () {
      button.disabled = true;
      say('moving...');
      var url =
        '/api/learners/' +
        encodeURIComponent(button.getAttribute('data-org')) +
        '/' +
        encodeURIComponent(button.getAttribute('data-learner-id')) +
        '/urgent';
      fetch(url, { method: 'POST', credentials: 'same-origin', headers: { 'x-csrf-token': csrf } })
        .then(function (r) {
          return r.json().then(function (j) {
            return { ok: r.ok, j: j };
          });
        })
        .then(function (res) {
          say(res.j.message || (res.ok ? 'done' : 'refused'));
          if (place && res.j.placeText) {
            place.textContent = res.j.placeText;
            if (res.j.place) place.setAttribute('data-queue-state', res.j.place.state);
          }
          button.disabled = false;
        })
        .catch(function (e) {
          say('not moved: ' + e.message);
          button.disabled = false;
        });
    });
  }
  if (document.readyState === 'loading') document.addEventListener('DOMContentLoaded', start);
  else start();
})();
