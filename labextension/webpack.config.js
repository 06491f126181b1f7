// Extra webpack configuration for the JupyterLab extension build (package.json
// `jupyterlab.webpackConfig`). node-diff3 publishes only an `exports` map whose
// first matching condition differs between build environments: in pip's isolated
// build it resolved to no code at all, and every proposed cell edit failed to draw.
// Pointing the import at the package's ES module build makes every build the same.
const path = require('path');

module.exports = {
  resolve: {
    alias: {
      'node-diff3$': path.resolve(__dirname, 'node_modules/node-diff3/dist/diff3.mjs')
    }
  }
};
