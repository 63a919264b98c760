"""det_sdk.py — the reference platform's Python SDK against a dtrain master, as a user's script
would use it: log in, create an experiment from a config dict and a model directory, wait,
list the trials with their states and metrics, download the top checkpoint.

    python det_sdk.py CONFIG.yaml MODEL_DIR OUT_DIR [KEY=VALUE ...]

The master is $DET_MASTER. KEY=VALUE pairs override the config (dotted keys, YAML values).
Prints one "key: value" line per fact for tests/e2e/test_det_client.sh to check.
"""
import os
import sys

from determined.experimental import client
from ruamel.yaml import YAML  # the SDK's own YAML reader

yaml = YAML(typ="safe")


def override(cfg, pairs):
    for pair in pairs:
        key, value = pair.split("=", 1)
        node = cfg
        parts = key.split(".")
        for p in parts[:-1]:
            node = node.setdefault(p, {})
        node[parts[-1]] = yaml.load(value)


def main():
    config_path, model_dir, out_dir = sys.argv[1:4]
    with open(config_path) as f:
        config = yaml.load(f)
    override(config, sys.argv[4:])
    client.login(master=os.environ.get("DET_MASTER"), user="determined", password="")
    exp = client.create_experiment(config=config, model_dir=model_dir)
    print(f"experiment: {exp.id}")
    state = exp.wait(interval=1)
    print(f"state: {state.value}")
    for trial in exp.list_trials():
        print(f"trial: {trial.id} {trial.state.value}")
        val = (trial.summary_metrics or {}).get("validation_metrics", {})
        for name in sorted(val):
            print(f"validation: {trial.id} {name} last={val[name]['last']:.4f}")
    ckpt = exp.top_checkpoint()
    print(f"checkpoint: {ckpt.uuid}")
    path = ckpt.download(out_dir)
    print(f"downloaded: {path} {sorted(os.listdir(path))}")


if __name__ == "__main__":
    main()
