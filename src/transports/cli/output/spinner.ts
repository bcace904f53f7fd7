import type { Sink } from './output.js';

const FRAMES = ['⠋', '⠙', '⠹', '⠸', '⠼', '⠴', '⠦', '⠧', '⠇', '⠏'];
const DELAY_MS = 300;

/** Shows `⠋ label` on a terminal after 300 ms; the returned function stops and erases it. */
export function startSpinner(sink: Sink, label: string): () => void {
  let frame = 0;
  let shown = false;
  let interval: NodeJS.Timeout | undefined;
  const draw = () => {
    shown = true;
    sink.write(`\r${FRAMES[frame++ % FRAMES.length]} ${label}`);
  };
  const delay = setTimeout(() => {
    draw();
    interval = setInterval(draw, 80);
    interval.unref?.();
  }, DELAY_MS);
  delay.unref?.();
  return () => {
    clearTimeout(delay);
    if (interval) clearInterval(interval);
    if (shown) sink.write('\r\x1b[K');
  };
}
