// Piscina worker entry. Workers do not inherit the TypeScript loader, so
// register tsx here, then load the TypeScript task runner.
import { register } from 'tsx/esm/api';

register();
const { runTask } = await import('./work.ts');

export default runTask;
