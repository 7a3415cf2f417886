/** Credentials in messages (src/cli/redis.ts): redactUrl and redactSecrets. */
import { expect } from 'chai';
import { redactSecrets, redactUrl, rememberSecrets } from '../src/cli/redis.js';

describe('redaction of Redis credentials', () => {
  it('redactUrl hides the password whatever the scheme, and when the URL does not parse', () => {
    const cases: [string, string][] = [
      ['redis://user:pw-1@h:6379/0', 'redis://user:***@h:6379/0'],
      ['rediss://:pw-1@h', 'rediss://:***@h'],
      ['http://user:pw-1@h:1', 'http://user:***@h:1'],
      ['redis://user:pw/with@at@h:99999', 'redis://user:***@h:99999'],
      ['redis://pw-as-user@h', 'redis://***@h'],
      ['user:pw-1@h', 'user:***@h'],
      ['redis://h:6379', 'redis://h:6379'],
      ['notaurl::', 'notaurl::'],
    ];
    for (const [url, shown] of cases) expect(redactUrl(url), url).to.equal(shown);
  });

  it('redactSecrets hides remembered passwords anywhere in a message, raw or percent-decoded', () => {
    rememberSecrets('http://u:s%40cret-1@h', {});
    rememberSecrets(undefined, { REDIS_PASSWORD: 'env-secret-2' });
    expect(redactSecrets('connect ENOENT //u:s%40cret-1@h')).to.equal('connect ENOENT //u:***@h');
    expect(redactSecrets('password s@cret-1 and env-secret-2')).to.equal('password *** and ***');
    // any URL's credentials, remembered or not
    expect(redactSecrets('at redis://x:other@h:1 and "rediss://y:z@h"')).to.equal(
      'at redis://x:***@h:1 and "rediss://y:***@h"',
    );
  });
});
