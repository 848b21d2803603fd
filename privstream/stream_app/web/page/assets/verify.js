/* The page's release verifier: Ed25519 signatures checked in the browser with WebCrypto.
 *
 * It implements the release specification (docs: Reference, Release specification): a release
 * is trusted only if its exact bytes, as served, carry a valid Ed25519 signature
 * (header Privstream-Signature, base64) by a key of the deployment's key statement (/keys) named
 * by Privstream-Key-Id, whose id is the first 16 hex digits of the SHA-256 of the raw public key.
 * A retired key (not_after) verifies only releases scheduled at or before its retirement. The
 * bytes are verified before they are parsed; nothing is re-serialised. Where /keys states the
 * deployment (its "deployment" statement, signed by one of its keys), a verified release whose
 * certificate.ledger_id is another is refused (foreign_deployment: a deployment sharing the key);
 * a statement that does not verify decides nothing.
 *
 * PrivstreamVerify.fetchRelease(url) answers {release, problem, keyId} (null for a 404):
 * problem is null when the release verifies, else the reason, as the Python client names it
 * (unsigned, unknown_key, retired_key, bad_signature, foreign_deployment, not_a_release), or why it could not be
 * checked: "unverifiable" where the browser offers no Ed25519 (WebCrypto needs a secure context,
 * HTTPS or this machine, and a browser that implements Ed25519), "keys_unavailable" when /keys
 * cannot be read, "invalid_keys" when its statement is malformed (an id that is not its key's).
 */
(function () {
  "use strict";

  var KEYS_REFRESH_MS = 60000;
  var DEPLOYMENT_TYPE = "privstream-deployment/1";

  function fromBase64(text) {
    if (typeof text !== "string" || !/^[A-Za-z0-9+/]*={0,2}$/.test(text) || text.length % 4) {
      throw new Error("not base64");
    }
    var raw = atob(text), out = new Uint8Array(raw.length);
    for (var i = 0; i < raw.length; i++) out[i] = raw.charCodeAt(i);
    return out;
  }

  function hex(bytes) {
    return Array.prototype.map.call(new Uint8Array(bytes), function (b) {
      return (b < 16 ? "0" : "") + b.toString(16);
    }).join("");
  }

  function available() {
    return typeof crypto !== "undefined" && !!crypto.subtle;
  }

  // A key statement ({"keys": [...]}) as {id: {key: CryptoKey, notAfter: ms or null}}; an entry
  // whose id does not match its key, or of another algorithm, makes the whole statement invalid.
  function readKeys(statement) {
    if (!statement || !Array.isArray(statement.keys)) {
      return Promise.reject(new Error('a key statement is {"keys": [...]}'));
    }
    return Promise.all(statement.keys.map(function (entry) {
      if ((entry.algorithm || "Ed25519") !== "Ed25519") {
        throw new Error("unsupported key algorithm " + entry.algorithm);
      }
      var raw = fromBase64(entry.public_key);
      if (raw.length !== 32) throw new Error("an Ed25519 public key has 32 bytes");
      return crypto.subtle.digest("SHA-256", raw).then(function (digest) {
        var id = hex(digest).slice(0, 16);
        if (entry.key_id !== undefined && entry.key_id !== null && entry.key_id !== id) {
          throw new Error("key id " + entry.key_id + " does not match its public key (" + id + ")");
        }
        return crypto.subtle.importKey("raw", raw, { name: "Ed25519" }, false, ["verify"]).then(function (key) {
          var notAfter = entry.not_after === null || entry.not_after === undefined ? null
            : Date.parse(/[zZ]|[+-]\d\d:?\d\d$/.test(entry.not_after) ? entry.not_after : entry.not_after + "Z");
          if (notAfter !== null && !isFinite(notAfter)) throw new Error("not_after must be an ISO 8601 time");
          return [id, { key: key, notAfter: notAfter }];
        });
      });
    })).then(function (pairs) {
      var keys = {};
      pairs.forEach(function (p) { if (!(p[0] in keys)) keys[p[0]] = p[1]; });  // the first listing wins
      return keys;
    });
  }

  // Whether `signature` (base64) by key `keyId` of `keys` verifies `bytes` (a promise of a boolean).
  function signedBy(keys, bytes, keyId, signature) {
    var entry = Object.prototype.hasOwnProperty.call(keys, keyId) ? keys[keyId] : null;
    if (!entry) return Promise.resolve(false);
    var sig;
    try { sig = fromBase64(signature); } catch (err) { return Promise.resolve(false); }
    return crypto.subtle.verify({ name: "Ed25519" }, entry.key, sig, bytes).catch(function () { return false; });
  }

  // The ledger id a key statement's "deployment" states, if a key of `keys` (read from it) signed
  // it over the canonical JSON of {key_id, ledger_id, type}; null if absent or if it does not
  // verify (it then decides nothing), as the Python client's deployment_ledger_id.
  function readDeployment(statement, keys) {
    var d = statement && statement.deployment;
    if (!d || typeof d !== "object" || d.type !== DEPLOYMENT_TYPE || typeof d.ledger_id !== "string" ||
        typeof d.key_id !== "string" || typeof d.signature !== "string") {
      return Promise.resolve(null);
    }
    var signed = JSON.stringify({ key_id: d.key_id, ledger_id: d.ledger_id, type: DEPLOYMENT_TYPE });  // keys sorted
    return signedBy(keys, new TextEncoder().encode(signed), d.key_id, d.signature).then(function (ok) {
      return ok ? d.ledger_id : null;
    });
  }

  function ledgerIdOf(bytes) {
    try {
      var id = JSON.parse(new TextDecoder().decode(bytes)).certificate.ledger_id;
      return typeof id === "string" ? id : null;
    } catch (err) { return null; }
  }

  // problem(), then the deployment: a release that verifies but names another ledger than
  // `ledgerId` (the one /keys states; null: none stated) is foreign_deployment.
  function releaseProblem(keys, ledgerId, bytes, keyId, signature, timeMs) {
    return problem(keys, bytes, keyId, signature, timeMs).then(function (p) {
      if (p !== null || ledgerId === null) return p;
      return ledgerIdOf(bytes) === ledgerId ? null : "foreign_deployment";
    });
  }

  // Why the bytes are not trusted (null: they verify). timeMs: when they were published (a Kafka
  // record's timestamp); null reads the release's signed publication.scheduled_at instead.
  function problem(keys, bytes, keyId, signature, timeMs) {
    if (!keyId || !signature) return Promise.resolve("unsigned");
    var entry = Object.prototype.hasOwnProperty.call(keys, keyId) ? keys[keyId] : null;
    if (!entry) return Promise.resolve("unknown_key");
    var sig;
    try { sig = fromBase64(signature); } catch (err) { return Promise.resolve("bad_signature"); }
    if (entry.notAfter !== null && timeMs !== null && timeMs !== undefined && timeMs > entry.notAfter) {
      return Promise.resolve("retired_key");
    }
    return crypto.subtle.verify({ name: "Ed25519" }, entry.key, sig, bytes).then(function (ok) {
      if (!ok) return "bad_signature";
      if (entry.notAfter !== null && (timeMs === null || timeMs === undefined)) {
        var scheduled = scheduledAt(bytes);  // signed: the retired key vouched for it
        if (scheduled === null || scheduled > entry.notAfter) return "retired_key";
      }
      return null;
    }, function () { return "bad_signature"; });
  }

  function scheduledAt(bytes) {
    try {
      var p = JSON.parse(new TextDecoder().decode(bytes)).certificate.publication;
      var t = p ? Date.parse(p.scheduled_at) : NaN;
      return isFinite(t) ? t : null;
    } catch (err) { return null; }
  }

  // The deployment's keys and its ledger id ({keys, ledgerId}), fetched from /keys; fetched again
  // (at most once a minute) when a release names a key the page does not know: a rotation needs
  // no reload.
  var cached = null, fetchedAt = 0;
  function deploymentKeys(force) {
    if (cached && !(force && Date.now() - fetchedAt > KEYS_REFRESH_MS)) return cached;
    fetchedAt = Date.now();
    cached = fetch("/keys", { cache: "no-store" }).then(function (r) {
      if (!r.ok) throw new Error("/keys: HTTP " + r.status);
      return r.json();
    }).catch(function (err) {
      var unavailable = new Error("cannot read /keys: " + err);
      unavailable.keys = true;
      throw unavailable;
    }).then(function (statement) {
      return readKeys(statement).then(function (keys) {
        return readDeployment(statement, keys).then(function (ledgerId) {
          return { keys: keys, ledgerId: ledgerId };
        });
      });
    });
    cached.catch(function () { cached = null; });
    return cached;
  }

  function decode(bytes) {
    try {
      var release = JSON.parse(new TextDecoder("utf-8", { fatal: true }).decode(bytes));
      return release && typeof release === "object" && release.certificate && release.hypothesis ? release : null;
    } catch (err) { return null; }
  }

  function fetchRelease(url) {
    return fetch(url, { cache: "no-store" }).then(function (r) {
      if (r.status === 404) return null;
      if (!r.ok) throw new Error(url + ": HTTP " + r.status);
      var keyId = r.headers.get("Privstream-Key-Id"), signature = r.headers.get("Privstream-Signature");
      return r.arrayBuffer().then(function (body) {
        var bytes = new Uint8Array(body);
        var check = function (d) { return releaseProblem(d.keys, d.ledgerId, bytes, keyId, signature, null); };
        var checked = !available() ? Promise.resolve("unverifiable") : deploymentKeys(false).then(function (d) {
          return check(d).then(function (p) {
            return p === "unknown_key" ? deploymentKeys(true).then(check) : p;
          });
        });
        return checked.catch(function (err) {
          if (err && err.name === "NotSupportedError") return "unverifiable";
          return err && err.keys ? "keys_unavailable" : "invalid_keys";
        }).then(function (p) {
          var release = decode(bytes);
          return { release: release, problem: p === null && release === null ? "not_a_release" : p, keyId: keyId };
        });
      });
    });
  }

  // For the tests and for anyone checking a release by hand: verify bytes (text) against a key
  // statement (an object or its JSON), as the Python client's KeySet.problem does, and against
  // the deployment it states (its "deployment" statement, if one of its keys signed it).
  function verifyWith(statement, text, keyId, signature, timeMs) {
    if (!available()) return Promise.resolve("unverifiable");
    var parsed = typeof statement === "string" ? JSON.parse(statement) : statement;
    return readKeys(parsed).then(function (keys) {
      return readDeployment(parsed, keys).then(function (ledgerId) {
        return releaseProblem(keys, ledgerId, new TextEncoder().encode(text), keyId, signature, timeMs);
      });
    });
  }

  window.PrivstreamVerify = {
    available: available,
    readKeys: readKeys,
    readDeployment: readDeployment,
    problem: problem,
    fetchRelease: fetchRelease,
    verifyWith: verifyWith,
    forgetKeys: function () { cached = null; },
  };
})();
