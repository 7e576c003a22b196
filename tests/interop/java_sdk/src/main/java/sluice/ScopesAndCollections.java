package sluice;

import com.couchbase.client.core.error.CollectionExistsException;
import com.couchbase.client.core.error.CollectionNotFoundException;
import com.couchbase.client.core.error.CouchbaseException;
import com.couchbase.client.core.error.DocumentNotFoundException;
import com.couchbase.client.core.error.ScopeExistsException;
import com.couchbase.client.core.error.ScopeNotFoundException;
import com.couchbase.client.java.Bucket;
import com.couchbase.client.java.Collection;
import com.couchbase.client.java.json.JsonObject;
import com.couchbase.client.java.manager.collection.CollectionManager;
import com.couchbase.client.java.manager.collection.CollectionSpec;
import com.couchbase.client.java.manager.collection.ScopeSpec;

import java.time.Duration;
import java.time.Instant;
import java.util.Set;
import java.util.UUID;
import java.util.stream.Collectors;

import static com.couchbase.client.java.kv.GetOptions.getOptions;

/**
 * Scopes and collections through the Java SDK: the collection manager (REST), documents of a
 * created collection (KV with collection ids), the same key in two collections, and a drop
 * that takes the collection's documents with it.
 */
final class ScopesAndCollections {
    private ScopesAndCollections() {
    }

    static void run(Bucket bucket) throws Exception {
        CollectionManager mgr = bucket.collections();
        String scope = "s" + UUID.randomUUID().toString().replace("-", "").substring(0, 12);
        mgr.createScope(scope);
        Checks.refused(ScopeExistsException.class, () -> mgr.createScope(scope));
        mgr.createCollection(scope, "a");
        mgr.createCollection(scope, "b");
        Checks.refused(CollectionExistsException.class, () -> mgr.createCollection(scope, "a"));
        Checks.expect(names(mgr, scope).equals(Set.of("a", "b")), "listed: " + names(mgr, scope));

        Collection a = bucket.scope(scope).collection("a");
        Collection b = bucket.scope(scope).collection("b");
        for (int i = 0; i < 50; i++) {
            a.upsert("k" + i, JsonObject.create().put("in", "a").put("i", i));
            b.upsert("k" + i, JsonObject.create().put("in", "b").put("i", i));
        }
        for (int i = 0; i < 50; i++) {
            Checks.expect(a.get("k" + i).contentAsObject().getString("in").equals("a"), "a's k" + i);
            Checks.expect(b.get("k" + i).contentAsObject().getString("in").equals("b"), "b's k" + i);
        }
        a.remove("k0");
        Checks.refused(DocumentNotFoundException.class, () -> a.get("k0"));
        Checks.expect(b.get("k0").contentAsObject().getString("in").equals("b"), "b keeps k0");

        mgr.dropCollection(scope, "a");
        Checks.refused(CollectionNotFoundException.class, () -> mgr.dropCollection(scope, "a"));
        Checks.refused(CouchbaseException.class,
                () -> a.get("k1", getOptions().timeout(Duration.ofSeconds(2))));
        // The same name again is a new, empty collection (the SDK learns its new id).
        mgr.createCollection(scope, "a");
        Collection again = bucket.scope(scope).collection("a");
        Instant deadline = Instant.now().plusSeconds(20);
        while (true) {
            try {
                again.upsert("fresh", JsonObject.create().put("new", true));
                break;
            } catch (CouchbaseException e) {
                if (Instant.now().isAfter(deadline)) {
                    throw e;
                }
                Thread.sleep(100);
            }
        }
        Checks.refused(DocumentNotFoundException.class, () -> again.get("k1"));
        Checks.expect(b.get("k1").contentAsObject().getString("in").equals("b"), "b keeps k1");

        mgr.dropScope(scope);
        Checks.refused(ScopeNotFoundException.class, () -> mgr.dropScope(scope));
        Checks.expect(mgr.getAllScopes().stream().noneMatch(s -> s.name().equals(scope)),
                "the dropped scope is not listed");
    }

    private static Set<String> names(CollectionManager mgr, String scope) {
        return mgr.getAllScopes().stream()
                .filter(s -> s.name().equals(scope))
                .map(ScopeSpec::collections)
                .flatMap(Set::stream)
                .map(CollectionSpec::name)
                .collect(Collectors.toSet());
    }
}
