// The types of .dependency-cruiser.mjs, for the test that runs its rules.
import type { IConfiguration, IForbiddenRuleType } from 'dependency-cruiser';

export interface Layer {
  name: string;
  paths: string[];
}
export declare const LAYERS: Array<Layer | Layer[]>;
declare const config: { forbidden: IForbiddenRuleType[]; options: NonNullable<IConfiguration['options']> };
export default config;
