package sluice;

import com.couchbase.client.core.error.CasMismatchException;
import com.couchbase.client.core.error.CouchbaseException;
import com.couchbase.client.core.error.DocumentExistsException;
import com.couchbase.client.core.error.DocumentNotFoundException;
import com.couchbase.client.core.error.subdoc.PathExistsException;
import com.couchbase.client.core.error.subdoc.PathNotFoundException;
import com.couchbase.client.core.service.ServiceType;
import com.couchbase.client.java.Bucket;
import com.couchbase.client.java.Cluster;
import com.couchbase.client.java.ClusterOptions;
import com.couchbase.client.java.Collection;
import com.couchbase.client.java.codec.RawBinaryTranscoder;
import com.couchbase.client.java.diagnostics.WaitUntilReadyOptions;
import com.couchbase.client.java.json.JsonArray;
import com.couchbase.client.java.json.JsonObject;
import com.couchbase.client.java.kv.GetResult;
import com.couchbase.client.java.kv.LookupInResult;
import com.couchbase.client.java.kv.LookupInSpec;
import com.couchbase.client.java.kv.MutateInResult;
import com.couchbase.client.java.kv.MutateInSpec;
import com.couchbase.client.java.kv.MutationResult;
import com.couchbase.client.java.kv.StoreSemantics;

import java.time.Duration;
import java.time.Instant;
import java.util.EnumSet;
import java.util.List;
import java.util.UUID;

import static com.couchbase.client.java.kv.DecrementOptions.decrementOptions;
import static com.couchbase.client.java.kv.GetOptions.getOptions;
import static com.couchbase.client.java.kv.IncrementOptions.incrementOptions;
import static com.couchbase.client.java.kv.MutateInOptions.mutateInOptions;
import static com.couchbase.client.java.kv.ReplaceOptions.replaceOptions;
import static com.couchbase.client.java.kv.UpsertOptions.upsertOptions;

/**
 * The document API through the Couchbase Java SDK: each check prints "ok NAME" or throws
 * with what differed. Arguments: connection string, user, password, bucket.
 */
public final class DocumentApi {
    private static Collection col;

    public static void main(String[] args) {
        Cluster cluster = Cluster.connect(args[0], ClusterOptions.clusterOptions(args[1], args[2])
                .environment(env -> env.timeoutConfig(t -> t.kvTimeout(Duration.ofSeconds(3)))));
        try {
            Bucket bucket = cluster.bucket(args[3]);
            // The bucket opens in the background: wait for it (on the KV service only, the
            // one Sluice runs) rather than let the first operation's timeout cover it, which
            // a loaded machine can outlast.
            bucket.waitUntilReady(Duration.ofSeconds(30), WaitUntilReadyOptions
                    .waitUntilReadyOptions().serviceTypes(EnumSet.of(ServiceType.KV)));
            col = bucket.defaultCollection();
            check("lookup_in", DocumentApi::lookupIn);
            check("mutate_in", DocumentApi::mutateIn);
            check("mutate_in_failures", DocumentApi::mutateInFailures);
            check("xattrs_and_macros", DocumentApi::xattrs);
            check("get_with_expiry_and_projection", DocumentApi::getWithExpiryAndProjection);
            check("lock", DocumentApi::lock);
            check("get_and_touch_and_exists", DocumentApi::touchAndExists);
            check("binary", DocumentApi::binary);
            check("collections", () -> ScopesAndCollections.run(cluster.bucket(args[3])));
            System.out.println("all ok");
        } finally {
            cluster.disconnect();
        }
    }

    interface Check {
        void run() throws Exception;
    }

    private static void check(String name, Check c) {
        try {
            c.run();
        } catch (Exception e) {
            throw new AssertionError(name + " failed: " + e, e);
        }
        System.out.println("ok " + name);
    }

    private static String key(String prefix) {
        return prefix + "-" + UUID.randomUUID().toString().substring(0, 12);
    }

    private static JsonObject doc() {
        return JsonObject.create()
                .put("name", "ada")
                .put("tags", JsonArray.from("a", "b"))
                .put("n", 41)
                .put("addr", JsonObject.create().put("city", "paris").put("zip", "75001"));
    }

    private static void lookupIn() throws Exception {
        String k = key("look");
        MutationResult up = col.upsert(k, doc());
        LookupInResult r = col.lookupIn(k, List.of(LookupInSpec.get("addr.city"),
                LookupInSpec.exists("n"), LookupInSpec.exists("nope"), LookupInSpec.count("tags"),
                LookupInSpec.get("tags[-1]")));
        Checks.expect(r.cas() == up.cas(), "lookup CAS is the document's");
        Checks.expect(r.contentAs(0, String.class).equals("paris"), "get addr.city");
        Checks.expect(r.exists(1) && !r.exists(2), "exists");
        Checks.expect(r.contentAs(3, Integer.class) == 2, "count tags");
        Checks.expect(r.contentAs(4, String.class).equals("b"), "tags[-1]");
        Checks.refused(DocumentNotFoundException.class,
                () -> col.lookupIn(key("absent"), List.of(LookupInSpec.get("a"))));
    }

    private static void mutateIn() throws Exception {
        String k = key("mut");
        col.upsert(k, doc());
        MutateInResult r = col.mutateIn(k, List.of(
                MutateInSpec.upsert("addr.city", "lyon"),
                MutateInSpec.insert("email", "ada@example.org"),
                MutateInSpec.replace("n", 42),
                MutateInSpec.remove("addr.zip"),
                MutateInSpec.arrayAppend("tags", List.of("c")),
                MutateInSpec.arrayPrepend("tags", List.of("z")),
                MutateInSpec.arrayInsert("tags[1]", List.of("y")),
                MutateInSpec.arrayAddUnique("tags", "d"),
                MutateInSpec.increment("visits", 5),
                MutateInSpec.upsert("deep.er", true).createPath()));
        Checks.expect(r.contentAs(8, Long.class) == 5, "counter result");
        JsonObject got = col.get(k).contentAsObject();
        JsonObject want = JsonObject.create().put("name", "ada")
                .put("tags", JsonArray.from("z", "y", "a", "b", "c", "d")).put("n", 42)
                .put("addr", JsonObject.create().put("city", "lyon"))
                .put("email", "ada@example.org").put("visits", 5)
                .put("deep", JsonObject.create().put("er", true));
        Checks.expect(got.equals(want), "document after mutate_in: " + got);
        String fresh = key("mkdoc");
        col.mutateIn(fresh, List.of(MutateInSpec.upsert("a.b", 1).createPath()),
                mutateInOptions().storeSemantics(StoreSemantics.UPSERT));
        Checks.expect(col.get(fresh).contentAsObject().equals(
                JsonObject.create().put("a", JsonObject.create().put("b", 1))), "mkdoc");
        Checks.refused(DocumentExistsException.class, () -> col.mutateIn(fresh,
                List.of(MutateInSpec.upsert("c", 1)),
                mutateInOptions().storeSemantics(StoreSemantics.INSERT)));
    }

    private static void mutateInFailures() throws Exception {
        String k = key("fail");
        MutationResult up = col.upsert(k, doc());
        Checks.refused(PathExistsException.class,
                () -> col.mutateIn(k, List.of(MutateInSpec.upsert("x", 1),
                        MutateInSpec.insert("name", "bob"))));
        Checks.refused(PathNotFoundException.class,
                () -> col.mutateIn(k, List.of(MutateInSpec.replace("nope", 1))));
        Checks.refused(CasMismatchException.class, () -> col.mutateIn(k,
                List.of(MutateInSpec.upsert("n", 1)), mutateInOptions().cas(up.cas() + 1)));
        GetResult g = col.get(k);
        Checks.expect(g.cas() == up.cas() && g.contentAsObject().equals(doc()), "nothing changed");
    }

    private static void xattrs() throws Exception {
        String k = key("xattr");
        col.upsert(k, doc());
        MutateInResult r = col.mutateIn(k, List.of(
                MutateInSpec.upsert("meta.owner", "ada").xattr().createPath(),
                MutateInSpec.upsert("meta.cas", com.couchbase.client.java.kv.MutateInMacro.CAS)
                        .xattr().createPath(),
                MutateInSpec.increment("n", 1)));
        LookupInResult x = col.lookupIn(k, List.of(LookupInSpec.get("meta").xattr(),
                LookupInSpec.get("$document.CAS").xattr(), LookupInSpec.get("n")));
        JsonObject meta = x.contentAsObject(0);
        Checks.expect(meta.getString("owner").equals("ada"), "user xattr: " + meta);
        Checks.expect(x.contentAs(2, Integer.class) == 42, "body counter");
        Checks.expect(Long.parseUnsignedLong(x.contentAs(1, String.class).substring(2), 16) == r.cas(),
                "$document.CAS is the mutation's CAS");
        // The macro holds the CAS byte-reversed, as Couchbase Server writes it.
        long macro = Long.parseUnsignedLong(meta.getString("cas").substring(2), 16);
        Checks.expect(Long.reverseBytes(macro) == r.cas(), "the CAS macro: " + meta);
        Checks.expect(col.get(k).contentAsObject().getInt("n") == 42, "plain get has the body only");
    }

    private static void getWithExpiryAndProjection() throws Exception {
        String k = key("exp");
        col.upsert(k, doc(), upsertOptions().expiry(Duration.ofHours(1)));
        GetResult g = col.get(k, getOptions().withExpiry(true));
        Instant at = g.expiryTime().orElseThrow();
        long left = at.getEpochSecond() - Instant.now().getEpochSecond();
        Checks.expect(left > 3500 && left <= 3601, "expiry in an hour: " + at);
        Checks.expect(g.contentAsObject().equals(doc()), "document with expiry");
        JsonObject p = col.get(k, getOptions().project("name", "addr.city")).contentAsObject();
        Checks.expect(p.equals(JsonObject.create().put("name", "ada")
                .put("addr", JsonObject.create().put("city", "paris"))), "projection: " + p);
    }

    private static void lock() throws Exception {
        String k = key("lock");
        col.upsert(k, doc());
        GetResult locked = col.getAndLock(k, Duration.ofSeconds(10));
        Checks.refused(CouchbaseException.class,
                () -> col.upsert(k, doc(), upsertOptions().timeout(Duration.ofSeconds(1))));
        col.unlock(k, locked.cas());
        col.upsert(k, JsonObject.create().put("v", 2));
        GetResult again = col.getAndLock(k, Duration.ofSeconds(10));
        col.replace(k, JsonObject.create().put("v", 3), replaceOptions().cas(again.cas()));
        col.upsert(k, JsonObject.create().put("v", 4));
        Checks.expect(col.get(k).contentAsObject().getInt("v") == 4, "writes after the lock ended");
    }

    private static void touchAndExists() throws Exception {
        String k = key("touch");
        col.upsert(k, doc());
        GetResult g = col.getAndTouch(k, Duration.ofMinutes(10));
        Checks.expect(g.contentAsObject().equals(doc()), "get_and_touch content");
        Instant at = col.get(k, getOptions().withExpiry(true)).expiryTime().orElseThrow();
        Checks.expect(at.getEpochSecond() - Instant.now().getEpochSecond() > 500, "touched expiry");
        Checks.expect(col.exists(k).exists(), "exists");
        Checks.expect(!col.exists(key("absent")).exists(), "absent");
    }

    private static void binary() throws Exception {
        String k = key("counter");
        Checks.expect(col.binary().increment(k, incrementOptions().initial(10).delta(5)).content() == 10,
                "created at initial");
        Checks.expect(col.binary().increment(k, incrementOptions().delta(5)).content() == 15, "incr");
        Checks.expect(col.binary().decrement(k, decrementOptions().delta(20)).content() == 0,
                "decrement stops at 0");
        Checks.refused(DocumentNotFoundException.class,
                () -> col.binary().increment(key("none"), incrementOptions().delta(1)));
        String c = key("concat");
        col.upsert(c, "middle".getBytes(),
                upsertOptions().transcoder(RawBinaryTranscoder.INSTANCE));
        col.binary().append(c, "-end".getBytes());
        col.binary().prepend(c, "start-".getBytes());
        byte[] v = col.get(c, getOptions().transcoder(RawBinaryTranscoder.INSTANCE))
                .contentAsBytes();
        Checks.expect(new String(v).equals("start-middle-end"), "append/prepend: " + new String(v));
    }
}
