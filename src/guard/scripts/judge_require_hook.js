// cbrun judge-time require hook (src/guard/scripts/judge_require_hook.js).
//
// Preloaded with NODE_OPTIONS=--require /.cbrun/judge-node/ban.js.
// Refuses `require`s of banned packages (CBRUN_IMPORT_BAN, comma-separated;
// `pkg` also covers `pkg/sub`, `@scope` or `@scope/*` a whole scope, `node:`
// is ignored) made by workspace code (CBRUN_WORKSPACE, default /app), and
// relative or absolute requires that land inside node_modules/<banned>/.
// Everything under the workspace counts as workspace code, a node_modules
// directory there included (the agent put it there); code outside it (the
// hidden tests, a runner installed in the image) may require what it likes. On Node >= 20.6 the same check covers ESM
// `import` through module.register() (esm-hooks.mjs next to this file).
// A refusal prints "[cbrun judge-ban] import: ..." and throws an error with
// code MODULE_NOT_FOUND (ERR_MODULE_NOT_FOUND for import).
'use strict';
(function () {
  const Module = require('module');
  if (Module.__cbrunJudge) return;
  Module.__cbrunJudge = true;
  const ws = ((process.env.CBRUN_WORKSPACE || '/app').replace(/\/+$/, '')) || '/';
  const bans = (process.env.CBRUN_IMPORT_BAN || '')
    .split(',')
    .map((s) => s.trim().toLowerCase())
    .filter(Boolean)
    .map((b) => (b.endsWith('/*') ? b.slice(0, -2) : b));
  if (!bans.length) return;

  function banned(spec) {
    const s = String(spec).toLowerCase().replace(/^node:/, '');
    for (const b of bans) {
      if (s === b || s.startsWith(b + '/')) return b;
    }
    return null;
  }

  // Agent code: anything under the workspace.
  function agentFile(f) {
    if (typeof f !== 'string') return false;
    if (f !== ws && !f.startsWith(ws + '/')) return false;
    // `node -e` / stdin code gets a file name in the current directory.
    if (/\/\[(eval|stdin|worker eval)\]$/.test(f)) return false;
    // node_modules under the workspace is the agent's code too.
    return true;
  }

  // The package a resolved file belongs to, if it is in node_modules.
  function installedPackage(file) {
    const i = file.lastIndexOf('/node_modules/');
    if (i < 0) return null;
    const parts = file.slice(i + 14).split('/');
    return parts[0].startsWith('@') ? parts[0] + '/' + parts[1] : parts[0];
  }

  const reported = new Set();
  function refuse(what, from, code) {
    const line = '[cbrun judge-ban] import: ' + what + ' from ' + from;
    if (!reported.has(line)) {
      reported.add(line);
      try { require('fs').writeSync(2, line + '\n'); } catch (_) { /* closed stderr */ }
    }
    const e = new Error('cbrun: import of banned module ' + what + ' from ' + from);
    e.code = code;
    return e;
  }

  const origLoad = Module._load;
  Module._load = function (request, parent, isMain) {
    const from = parent && parent.filename;
    if (agentFile(from)) {
      let hit = banned(request) ? request : null;
      if (!hit && /^[./]/.test(request)) {
        try {
          const pkg = installedPackage(Module._resolveFilename(request, parent, isMain));
          if (pkg && banned(pkg)) hit = pkg;
        } catch (_) { /* let the real load report it */ }
      }
      if (hit) throw refuse(hit, from, 'MODULE_NOT_FOUND');
    }
    return origLoad.apply(this, arguments);
  };

  // ESM: resolve hooks run off-thread; register them from the main thread.
  try {
    const { isMainThread } = require('worker_threads');
    if (isMainThread && typeof Module.register === 'function') {
      const { pathToFileURL } = require('url');
      const hooks = require('path').join(__dirname, 'esm-hooks.mjs');
      Module.register(pathToFileURL(hooks).href, { data: { ws, bans } });
    }
  } catch (_) { /* older Node: CommonJS only */ }
})();
