# lora-worker's face scorer (SPEC §8), run by the worker in the trainer's venv: dlib's HOG face detector, its 5-point
# landmarks and its 128-D face embedding (one jitter), with face_recognition_models' weights. argv: the bytes of
# address space it may take, then image paths. stdout: one JSON object, per image in order either its faces (box as
# left, top, right, bottom; the detector's score; the embedding) or the error that image gave. Exit 3: the models or
# dlib cannot be imported (the fix is a pip install, not a retry).
import importlib.util
import json
import os
import resource
import sys

limit = int(sys.argv[1])
resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
# Out of a training step's way: the CPU's leftovers.
os.nice(10)

# face_recognition_models' weights are found, not imported: its __init__ needs pkg_resources, which the lock's
# setuptools (81 and later) no longer has.
try:
    import dlib
    models = importlib.util.find_spec("face_recognition_models")
    if models is None or not models.submodule_search_locations:
        raise ImportError("No module named 'face_recognition_models'")
except ImportError as err:
    print(json.dumps({"missing": str(err)}), flush=True)
    sys.exit(3)

weights = os.path.join(models.submodule_search_locations[0], "models")
detector = dlib.get_frontal_face_detector()
landmarks = dlib.shape_predictor(os.path.join(weights, "shape_predictor_5_face_landmarks.dat"))
encoder = dlib.face_recognition_model_v1(os.path.join(weights, "dlib_face_recognition_resnet_model_v1.dat"))


def faces_of(path):
    image = dlib.load_rgb_image(path)
    # One upsampling, as face_recognition's default; -0.0: every detection, with its score.
    boxes, scores, _ = detector.run(image, 1, 0.0)
    found = []
    for box, score in zip(boxes, scores):
        embedding = encoder.compute_face_descriptor(image, landmarks(image, box), 1)
        found.append({
            "box": [box.left(), box.top(), box.right(), box.bottom()],
            "score": round(score, 4),
            "embedding": [round(v, 6) for v in embedding],
        })
    return {"faces": found}


def answer(path):
    try:
        return faces_of(path)
    except MemoryError:
        return {"error": "out of memory (the scorer's address-space limit)"}
    except Exception as err:  # a bad image is answered, never the end of the others
        return {"error": f"{type(err).__name__}: {err}".strip()[:240]}


print(json.dumps({"images": [answer(path) for path in sys.argv[2:]]}), flush=True)
