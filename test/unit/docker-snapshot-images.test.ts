/** The one rule that keeps snapshot and fork images behind `snapshot` (DESIGN.md §10), by name and by label. */
import { describe, expect, it } from 'vitest';
import { LABEL_FORK, LABEL_SNAPSHOT, refuseSnapshotImage } from '../../src/adapters/providers/docker/snapshots.js';

const refused = (ref: string, labels: Record<string, string> | null = null) => {
  try {
    refuseSnapshotImage(ref, labels);
    return null;
  } catch (err) {
    return err as { code: string; message: string };
  }
};

describe('refuseSnapshotImage', () => {
  it('refuses the sbx-snapshot/ namespace by any spelling of Docker Hub, with 400 naming snapshot', () => {
    for (const ref of [
      'sbx-snapshot/a:latest',
      'sbx-snapshot/a',
      'docker.io/sbx-snapshot/a',
      'index.docker.io/sbx-snapshot/a@sha256:00',
      'SBX-SNAPSHOT/A',
    ]) {
      expect(refused(ref), ref).toMatchObject({ code: 'bad_request', message: expect.stringContaining('"snapshot": "<name>"') });
    }
    expect(refused('registry.example/sbx-snapshot/a')).toBeNull(); // another registry's repository, not ours
    expect(refused('busybox:latest')).toBeNull();
  });

  it('refuses any image labelled as a snapshot or fork image, whatever it is called', () => {
    expect(refused('4f0e1a2b3c4d', { [LABEL_SNAPSHOT]: 'x', 'sbx.installation_id': 'other' })).toMatchObject({ code: 'bad_request' });
    expect(refused('sha256:4f0e', { [LABEL_FORK]: 'sb-1' })).toMatchObject({ code: 'bad_request' });
    expect(refused('busybox:latest', { maintainer: 'x', 'sbx.installation_id': 'i' })).toBeNull();
    expect(refused('busybox:latest', {})).toBeNull();
  });
});
