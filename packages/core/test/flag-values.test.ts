import { parseByteSize, parseDuration } from '@etcd-steward/core';
import { expect, it } from 'vitest';

it('reads Go-style durations and byte sizes, and says what it wants otherwise', () => {
  expect(parseDuration('20s', 'p')).toBe(20_000);
  expect(parseDuration('1m30s', 'p')).toBe(90_000);
  expect(parseDuration('500ms', 'p')).toBe(500);
  expect(parseDuration('1.5h', 'p')).toBe(5_400_000);
  expect(parseDuration('0', 'p')).toBe(0);
  expect(() => parseDuration('20', 'delta-snapshot-period')).toThrow('--delta-snapshot-period "20" is not a duration');
  expect(() => parseDuration('20s5', 'p')).toThrow(/not a duration/);
  expect(parseByteSize('10485760', 'l')).toBe(10485760);
  expect(parseByteSize('10Mi', 'l')).toBe(10485760);
  expect(parseByteSize('1GiB', 'l')).toBe(1024 ** 3);
  expect(parseByteSize('500MB', 'l')).toBe(500e6);
  expect(() => parseByteSize('-1', 'spool-max-bytes')).toThrow('--spool-max-bytes "-1" is not a size');
  expect(() => parseByteSize('10 apples', 'l')).toThrow(/not a size/);
});
