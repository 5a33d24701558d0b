# Asks the installed sd-scripts itself whether it takes the worker's launches: its own argument parser
# (sdxl_train_network.setup_parser) reads each argv, and its own dataset schema (library/config_util, with the
# switches train_network.py gives it) reads each dataset TOML. Run by the trainer's venv Python, offline.
# argv[1]: {"sd_scripts": DIR, "mark": PREFIX, "cases": [{"name", "argv", "dataset_config"}]}; one report line each.
import contextlib
import json
import os
import sys

job = json.loads(sys.argv[1])


def report(**facts):
    print(job["mark"] + json.dumps(facts), flush=True)


class Refused(Exception):
    pass


def refuse(message):
    raise Refused(message)


os.chdir(job["sd_scripts"])
sys.path.insert(0, job["sd_scripts"])
try:
    # What sd-scripts prints while it loads goes to stderr; stdout carries only the reports.
    with contextlib.redirect_stdout(sys.stderr):
        import sdxl_train_network
        from library import config_util, sdxl_train_util, train_util
except BaseException as err:
    report(stage="import", error=f"{type(err).__name__}: {err}")
    sys.exit(1)
report(stage="import", error=None)

for case in job["cases"]:
    parser = sdxl_train_network.setup_parser()
    # argparse ends the process on a refusal; here it is an answer about this argv.
    parser.error = refuse
    # The parser's exact names: argparse would also take a prefix of a longer flag, which names another option.
    known = parser._option_string_actions
    flags = [word.split("=", 1)[0] for word in case["argv"] if word.startswith("--")]
    unknown = sorted({flag for flag in flags if flag not in known})
    error = dataset_error = None
    if not unknown:
        try:
            with contextlib.redirect_stdout(sys.stderr):
                args = parser.parse_args(case["argv"])
                # The checks of the arguments alone that a run makes before it loads anything.
                train_util.verify_command_line_training_args(args)
                train_util.verify_training_args(args)
                sdxl_train_util.verify_sdxl_training_args(args)
        except Refused as err:
            error = str(err)
        except BaseException as err:
            error = f"{type(err).__name__}: {err}"
        if error is None:
            try:
                with contextlib.redirect_stdout(sys.stderr):
                    sanitizer = config_util.ConfigSanitizer(True, True, args.masked_loss, True)
                    user_config = config_util.load_user_config(case["dataset_config"])
                    config_util.BlueprintGenerator(sanitizer).generate(user_config, args)
            except BaseException as err:
                dataset_error = f"{type(err).__name__}: {err}"
    report(stage="case", name=case["name"], unknown=unknown, error=error, dataset_error=dataset_error)
