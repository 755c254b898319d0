/**
 * Errors a program reports to its user. The message names what failed and what to do about it; the
 * exit code tells scripts and Kubernetes what kind of failure it was.
 */
export class StewardError extends Error {
  constructor(
    message: string,
    readonly exitCode: number,
    options?: { cause?: unknown },
  ) {
    super(message, options);
    this.name = new.target.name;
  }
}

/** Bad usage or configuration, found before any work starts: exit code 2. */
export class UsageError extends StewardError {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, 2, options);
  }
}

/** The work was attempted and failed: exit code 1. */
export class OperationError extends StewardError {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, 1, options);
  }
}

/** Content that fails an integrity check (sha256 trailer, size, format). */
export class IntegrityError extends OperationError {}

export function errorMessage(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}
