package sluice;

/** What every check shares: a condition that must hold, a call that must be refused. */
final class Checks {
    private Checks() {
    }

    static void expect(boolean cond, String what) {
        if (!cond) {
            throw new AssertionError(what);
        }
    }

    static <E extends Exception> void refused(Class<E> want, DocumentApi.Check c) throws Exception {
        try {
            c.run();
        } catch (Exception e) {
            if (want.isInstance(e)) {
                return;
            }
            throw new AssertionError("expected " + want.getSimpleName() + ", got " + e, e);
        }
        throw new AssertionError("expected " + want.getSimpleName() + ", but it worked");
    }
}
