import { UsageError } from '@etcd-steward/core';
import { CronExpressionParser } from 'cron-parser';

/** A cron schedule given by a flag: 5 fields as ebr's, or 6 with seconds first, in local time. */
export class CronSchedule {
  constructor(
    readonly spec: string,
    flag: string,
  ) {
    const fields = spec.trim().split(/\s+/).length;
    try {
      if (!spec.trim().startsWith('@') && fields !== 5 && fields !== 6) throw new Error(`${fields} fields, expected 5`);
      CronExpressionParser.parse(spec);
    } catch (err) {
      throw new UsageError(
        `--${flag} "${spec}" is not a cron schedule (${(err as Error).message}); e.g. "0 */1 * * *"`,
      );
    }
  }

  next(now: Date): Date {
    return CronExpressionParser.parse(this.spec, { currentDate: now }).next().toDate();
  }

  previous(now: Date): Date {
    return CronExpressionParser.parse(this.spec, { currentDate: now }).prev().toDate();
  }
}
