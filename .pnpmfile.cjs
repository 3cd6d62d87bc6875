// Packing (pnpm pack / publish): the `sparq-source` export condition points at
// TypeScript sources that are for development only and not in the tarball, so
// the published package.json leaves it out.
function withoutSourceCondition(exports) {
  if (typeof exports !== 'object' || exports === null) return exports;
  return Object.fromEntries(
    Object.entries(exports)
      .filter(([key]) => key !== 'sparq-source')
      .map(([key, value]) => [key, withoutSourceCondition(value)]),
  );
}

module.exports = {
  hooks: {
    beforePacking(pkg) {
      if (pkg.exports) pkg.exports = withoutSourceCondition(pkg.exports);
      return pkg;
    },
  },
};
