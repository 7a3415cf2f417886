/**
 * Watching a configuration file for changes (CallGate.watch): `changed` runs once things are
 * quiet for `debounceMs` after any change.
 *
 * The directory is watched, not the file: editors and config maps replace a file by rename (or
 * a symlink swap, Kubernetes' `..data`), after which a watch on the old inode would never fire
 * again. A file that is a link to a file in another directory has that directory watched too
 * (an edit of the target is a change), followed again after each change (the link may point
 * elsewhere now).
 */
import { realpathSync, watch, type FSWatcher } from 'node:fs';
import { basename, dirname } from 'node:path';

export class ConfigWatch {
  private readonly watcher: FSWatcher;
  /** The directory of the link's target, when it is not the file's own, and its watcher. */
  private target?: { dir: string; watcher: FSWatcher };
  private timer?: NodeJS.Timeout;
  private closed = false;

  constructor(
    private readonly path: string,
    private readonly debounceMs: number,
    private readonly changed: () => void,
    onError: (err: Error) => void,
  ) {
    const file = basename(path);
    this.watcher = watch(dirname(path), (_event, name) => {
      if (name === null || name === file || String(name).startsWith('..')) this.soon();
    });
    // an FSWatcher 'error' with no listener would crash the process
    this.watcher.on('error', onError);
    this.watcher.unref();
    this.follow();
  }

  private soon(): void {
    clearTimeout(this.timer);
    this.timer = setTimeout(() => {
      if (this.closed) return;
      this.follow();
      this.changed();
    }, this.debounceMs);
    this.timer.unref();
  }

  /** Watch the directory the file's link points into, if another one (and not already). */
  private follow(): void {
    let real: string | undefined;
    try {
      real = realpathSync(this.path);
    } catch {
      real = undefined; // missing now: the file's own directory tells when it is back
    }
    const dir = real !== undefined && dirname(real) !== dirname(this.path) ? dirname(real) : undefined;
    if (dir === this.target?.dir) return;
    this.target?.watcher.close();
    this.target = undefined;
    if (dir === undefined) return;
    const file = basename(real!);
    try {
      const watcher = watch(dir, (_event, name) => {
        if (name === null || name === file) this.soon();
      });
      // a target directory removed (a config map's swap): the file's own directory sees that
      watcher.on('error', () => undefined);
      watcher.unref();
      this.target = { dir, watcher };
    } catch {
      // not watchable: edits of the target are seen at the next change of the link
    }
  }

  close(): void {
    this.closed = true;
    clearTimeout(this.timer);
    this.watcher.close();
    this.target?.watcher.close();
  }
}
