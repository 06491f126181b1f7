// node-diff3's package lists a `browser` export (a script that only sets a global) next
// to its ES module; the extension build picked the script, which exports nothing to a
// bundle, so every proposal failed to draw. Resolve the ES module by path instead.
const path = require('path');

module.exports = {
  resolve: {
    alias: {
      'node-diff3$': path.resolve(__dirname, 'node_modules/node-diff3/dist/diff3.mjs')
    }
  }
};
