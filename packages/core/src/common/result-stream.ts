import { once } from 'node:events';

/**
 * Results written as they are found (a log, a range of keys), to stdout by default: each write waits while the
 * reader is behind, so that a slow pipe holds the program back instead of its memory growing. A reader that went
 * away (`| head`: EPIPE) ends the output quietly: `closed` tells the producer to stop, and the program ends as
 * `head` wanted, with no error.
 */
export class ResultStream {
  closed = false;

  constructor(private readonly stream: NodeJS.WritableStream = process.stdout) {
    stream.on('error', (err: NodeJS.ErrnoException) => {
      if (err.code !== 'EPIPE') throw err;
      this.closed = true;
    });
  }

  async write(text: string): Promise<void> {
    if (this.closed || text === '') return;
    if (this.stream.write(text)) return;
    // `once` rejects on the stream's error: EPIPE while waiting is the reader gone, as above
    await Promise.race([once(this.stream, 'drain'), once(this.stream, 'close')]).catch((err) => {
      if (!this.closed) throw err;
    });
  }
}
