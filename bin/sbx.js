#!/usr/bin/env node
// The sbx shim: check Node, load the built CLI, run main(argv). The exit code is set here, once.
// CommonJS on purpose (bin/package.json): a bare `sbx --version` answers without starting the ES
// module loader, which alone costs about a third of Node's own start-up.
'use strict';
const [major, minor, patch] = process.versions.node.split('.').map(Number);
const argv = process.argv.slice(2);

function finish(code) {
  process.exitCode = code;
  // Leave as soon as stdout and stderr have taken everything written (the callbacks of these empty
  // writes run after every earlier write is flushed, pipes included): a kept-alive connection or a
  // timer left by a command must not hold the exit (issue 33: it cost ~100-250 ms a command).
  process.stdout.write('', () => process.stderr.write('', () => process.exit()));
}

// A closed pipe (`sbx ls | head -1`) is not an error worth a stack trace.
process.stdout.on('error', (err) => {
  if (err && err.code === 'EPIPE') process.exit(process.exitCode ?? 0);
  throw err;
});

// The same floor as package.json `engines` (undici 7 needs 20.18.1).
if (major < 20 || (major === 20 && (minor < 18 || (minor === 18 && patch < 1)))) {
  process.stderr.write(`sbx: Node.js 20.18.1 or newer is required (this is ${process.version})\n`);
  finish(1);
} else if (argv.length === 1 && (argv[0] === '--version' || argv[0] === '-V')) {
  process.stdout.write(`${require('../package.json').version}\n`);
  finish(0);
} else {
  // `sbx exec ID CMD…` (the plain streamed form) runs from one CommonJS bundle without commander or
  // the command tree (issue 33); any other argv, or one it does not take, runs the full CLI.
  // SBX_CLI_FAST_PATH=0 turns it off (the tests compare both paths byte for byte).
  const fast = argv.includes('exec') && process.env.SBX_CLI_FAST_PATH !== '0' ? fastExec() : undefined;
  const run = (fast && fast(argv)) || import('../dist/cli.js').then(({ main }) => main(argv));
  run.then(finish, (err) => {
    process.stderr.write(`sbx: unexpected error: ${err && err.stack ? err.stack : String(err)}\n`);
    finish(1);
  });
}

/** The fast path's entry (dist/cli-exec.cjs), or undefined in a tree built without it (tsc alone). */
function fastExec() {
  try {
    return require('../dist/cli-exec.cjs').fastExec;
  } catch (err) {
    if (err && err.code === 'MODULE_NOT_FOUND' && String(err.message).includes('cli-exec.cjs')) return undefined;
    throw err;
  }
}
