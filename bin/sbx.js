#!/usr/bin/env node
// The sbx shim: check Node, load the built CLI, run main(argv). The exit code is set here, once.
const [major, minor] = process.versions.node.split('.').map(Number);

function finish(code) {
  process.exitCode = code;
  // Let stdout and stderr drain; then leave even if a stray handle (socket, timer) stayed open.
  process.stdout.write('', () => process.stderr.write('', () => setTimeout(() => process.exit(), 100).unref()));
}

// A closed pipe (`sbx ls | head -1`) is not an error worth a stack trace.
process.stdout.on('error', (err) => {
  if (err && err.code === 'EPIPE') process.exit(process.exitCode ?? 0);
  throw err;
});

if (major < 20 || (major === 20 && minor < 18)) {
  process.stderr.write(`sbx: Node.js 20.18 or newer is required (this is ${process.version})\n`);
  finish(1);
} else {
  try {
    const { main } = await import('../dist/cli.js');
    finish(await main(process.argv.slice(2)));
  } catch (err) {
    process.stderr.write(`sbx: unexpected error: ${err && err.stack ? err.stack : String(err)}\n`);
    finish(1);
  }
}
